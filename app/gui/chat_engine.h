// ChatEngine: what the window chats with. The in-process Engine is always there (shared with
// the app's HTTP server through an EngineShare, the window being one of its clients); while
// connected to a remote OpenAI-compatible server, the chat runs there instead. What only the
// in-process engine does (loading models, re-creating the KV pool, exporting and importing a
// conversation's KV) goes to local(), whichever drives the chat.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/remote/remote_engine.h"
#include "app/server/engine_share.h"
#include "engine/engine.h"

namespace kvdesk::gui {

class ChatEngine {
 public:
  // wake: called on any thread when the chat engine may have events.
  explicit ChatEngine(std::function<void()> wake);
  ~ChatEngine();
  ChatEngine(const ChatEngine&) = delete;
  ChatEngine& operator=(const ChatEngine&) = delete;

  // The engine chat requests go to now.
  EngineClient& chat();
  // The chat engine's events. The in-process engine's events are dropped while a remote server
  // drives the chat (it has no chat requests then; its model events no longer concern the window).
  std::vector<Event> poll_events();

  Engine& local() { return share_.engine(); }
  server::EngineShare& share() { return share_; }

  bool is_remote() const { return remote_ != nullptr; }
  // Drives the chat through this server from now on, replacing a previous one (which cancels
  // what it had in flight). ModelLoaded (connected) or an Error (request 0) follows.
  void connect(remote::RemoteOptions options);
  void use_local();   // back to the in-process engine

  // What a conversation records as the engine its answers came from: "in-process" or the URL.
  std::string label() const;

 private:
  std::function<void()> wake_;
  server::EngineShare share_;
  std::unique_ptr<EngineClient> window_;    // the window's client of the in-process engine
  std::unique_ptr<remote::RemoteEngine> remote_;
  std::string remote_url_;
};

inline constexpr const char* kInProcessEngine = "in-process";

}  // namespace kvdesk::gui
