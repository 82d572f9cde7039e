// UiAction: what the user asked for in one frame. The panels append actions; the app's
// controller carries them out (engine, store) after the frame. Plain data only.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvdesk::ui {

enum class ActionKind : uint8_t {
  NewChat,
  SelectConversation,   // id
  RenameConversation,   // id, text: the new title
  DeleteConversation,   // id (already confirmed)
  Search,               // text: the search string ("" shows all)
  Send,                 // text: the user's message, to the selected conversation
  Stop,                 // the selected conversation's answer
  Regenerate,           // a new answer to the last user message (a sibling branch)
  Variants,             // id: N new answers to the last user message at once (sibling branches, one prefill)
  EditResend,           // id: the user message edited, text: its new content (a sibling branch)
  SwitchBranch,         // id: the sibling message to show
  DeleteMessage,        // id: the message, with the replies under it (already confirmed)
  ContinueAnswer,       // id: an answer that stopped at its token limit, carried on in place
  SetSystemPrompt,      // text
  SetConversationSettings,   // the view model's chat.settings (its own fields) for the selected one
  SavePreset,           // text: name, text2: system prompt
  ApplyPreset,          // id
  DeletePreset,         // id
  SetSampling,          // the view model's sampling values
  OpenModel,            // text: path (the model picker, a file dropped on the window)
  CancelModelLoad,      // the model being loaded
  ReconfigureKv,        // the view model's ui.kv_edit
  SetChatTemplate,      // text: a chat template name, "" for the model's own
  ExportConversation,   // the selected one; text: "md" or "json", text2: the file's path
  ImportConversation,   // text: the path of a JSON export; the import is selected
  SetTheme,             // text: "dark" or "light"
  ServeHttp,            // id: 1 to serve over HTTP at ui.serve_edit's address, 0 to stop
  ConnectRemote,        // text: the server's URL, text2: its API key ("": none); the chat runs there
  ChooseRemoteModel,    // text: a model the connected server lists
  SetFontSize,          // text: the font size in pixels at a content scale of 1 ("17")
  RescanLibrary,        // the library's folders walked again (unchanged files are not re-read)
  AddLibraryFolder,     // text: a folder the library also searches (remembered)
  RemoveLibraryFolder,  // text: one of the user's library folders
  ShowInFolder,         // text: a file, shown in the desktop's file manager
  BrowseFolder,         // text: the folder the file browser lists next (remembered)
  Quit,
};

struct UiAction {
  UiAction(ActionKind kind_, int64_t id_ = 0, std::string text_ = {}, std::string text2_ = {})
      : kind(kind_), id(id_), text(std::move(text_)), text2(std::move(text2_)) {}

  ActionKind kind;
  int64_t id;
  std::string text;
  std::string text2;
};

using UiActions = std::vector<UiAction>;

const char* action_name(ActionKind kind);

}  // namespace kvdesk::ui
