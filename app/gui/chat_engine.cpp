// ChatEngine: the window's client of the shared in-process engine, or a remote server.
#include "app/gui/chat_engine.h"

namespace kvdesk::gui {

ChatEngine::ChatEngine(std::function<void()> wake) : wake_(std::move(wake)), window_(share_.connect(wake_)) {}

ChatEngine::~ChatEngine() = default;

EngineClient& ChatEngine::chat() { return remote_ ? static_cast<EngineClient&>(*remote_) : *window_; }

std::vector<Event> ChatEngine::poll_events() {
  std::vector<Event> local = window_->poll_events();
  return remote_ ? remote_->poll_events() : local;
}

void ChatEngine::connect(remote::RemoteOptions options) {
  remote_.reset();
  remote_url_ = options.url;
  remote_ = std::make_unique<remote::RemoteEngine>(std::move(options), wake_);
}

void ChatEngine::use_local() {
  remote_.reset();
  remote_url_.clear();
}

std::string ChatEngine::label() const { return remote_ ? remote_url_ : kInProcessEngine; }

}  // namespace kvdesk::gui
