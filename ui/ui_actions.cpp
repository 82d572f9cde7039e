// Names of the UI actions, for logs and script errors.
#include "ui/ui_actions.h"

namespace kvdesk::ui {

const char* action_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::NewChat: return "new chat";
    case ActionKind::SelectConversation: return "select conversation";
    case ActionKind::RenameConversation: return "rename conversation";
    case ActionKind::DeleteConversation: return "delete conversation";
    case ActionKind::Search: return "search";
    case ActionKind::Send: return "send";
    case ActionKind::Stop: return "stop";
    case ActionKind::Regenerate: return "regenerate";
    case ActionKind::EditResend: return "edit and resend";
    case ActionKind::SwitchBranch: return "switch branch";
    case ActionKind::DeleteMessage: return "delete message";
    case ActionKind::ContinueAnswer: return "continue answer";
    case ActionKind::SetSystemPrompt: return "set system prompt";
    case ActionKind::SetConversationSettings: return "set conversation settings";
    case ActionKind::SavePreset: return "save preset";
    case ActionKind::ApplyPreset: return "apply preset";
    case ActionKind::DeletePreset: return "delete preset";
    case ActionKind::SetSampling: return "set sampling";
    case ActionKind::OpenModel: return "open model";
    case ActionKind::CancelModelLoad: return "cancel model load";
    case ActionKind::ReconfigureKv: return "reconfigure KV";
    case ActionKind::SetChatTemplate: return "set chat template";
    case ActionKind::ExportConversation: return "export conversation";
    case ActionKind::ImportConversation: return "import conversation";
    case ActionKind::SetTheme: return "set theme";
    case ActionKind::ServeHttp: return "serve over HTTP";
    case ActionKind::ConnectRemote: return "connect to server";
    case ActionKind::ChooseRemoteModel: return "choose server model";
    case ActionKind::SetFontSize: return "set font size";
    case ActionKind::RescanLibrary: return "rescan library";
    case ActionKind::AddLibraryFolder: return "add library folder";
    case ActionKind::RemoveLibraryFolder: return "remove library folder";
    case ActionKind::ShowInFolder: return "show in folder";
    case ActionKind::BrowseFolder: return "browse folder";
    case ActionKind::Variants: return "variants";
    case ActionKind::Quit: return "quit";
  }
  return "?";
}

}  // namespace kvdesk::ui
