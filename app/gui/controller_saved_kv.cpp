// Controller, part 4: conversations' KV kept in the store between runs. When an answer finishes
// the engine exports the conversation's parked KV (the future is ready within one engine step)
// and update() hands it, once ready, to a KvSaver that compresses and writes it on its own
// thread, so the UI thread waits neither on the engine nor on the disk; closing waits for the
// exports and saves still pending. A conversation the engine does not hold (the app restarted,
// another model was loaded) gets its saved KV loaded in the background as soon as it is opened
// and imported when loaded, so the user's next turn finds it in the engine; a turn sent before
// the load is done waits for it, and the engine takes commands in order, so the import always
// lands before the turn.
// A remote server keeps its KV to itself: nothing is loaded, exported or imported while chatting there.
#include "app/chat/saved_kv.h"
#include "app/gui/controller.h"
#include "engine/error.h"

namespace kvdesk::gui {
namespace {

bool is_ready(const auto& future) { return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

}  // namespace

void Controller::prefetch_kv(store::ConversationId conversation) {
  if (conversation == 0 || !wants_kv_import(conversation) || kv_loads_.contains(conversation)) return;
  if (!store().kv_info(conversation)) return;
  kv_loads_[conversation] = chat::load_saved_kv_async(store().path(), conversation);
}

void Controller::import_loaded_kv() {
  for (auto it = kv_loads_.begin(); it != kv_loads_.end();) {
    if (!is_ready(it->second)) {
      ++it;
      continue;
    }
    const store::ConversationId conversation = it->first;
    chat::SavedKv saved = it->second.get();
    it = kv_loads_.erase(it);
    if (saved.kv && wants_kv_import(conversation)) {
      kv_imports_[conversation] = engine_.local().import_conversation(uint64_t(conversation), std::move(*saved.kv));
    }
  }
}

bool Controller::wants_kv_import(store::ConversationId conversation) const {
  return !engine_.is_remote() && vm_.model.state == ui::ModelState::Loaded && !reconfiguring_ &&
         !kv_in_pool_.contains(conversation) &&
         !kv_imports_.contains(conversation) && !live_request_of(conversation);
}

chat::SavedKv Controller::take_saved_kv(store::ConversationId conversation) {
  const auto it = kv_loads_.find(conversation);
  if (it == kv_loads_.end()) return chat::load_saved_kv(store(), conversation);
  chat::SavedKv saved = it->second.get();
  kv_loads_.erase(it);
  return saved;
}

std::string Controller::restore_kv(store::ConversationId conversation) {
  if (engine_.is_remote()) return "the server (its own cache)";
  if (kv_in_pool_.contains(conversation)) return "pool";
  if (kv_imports_.contains(conversation)) return "database";   // imported when the conversation was opened
  chat::SavedKv saved = take_saved_kv(conversation);
  if (!saved.kv) return "recomputed (" + saved.why_not + ")";
  kv_imports_[conversation] = engine_.local().import_conversation(uint64_t(conversation), std::move(*saved.kv));
  return "database";
}

std::string Controller::resolve_kv_source(store::ConversationId conversation, const std::string& source) {
  const auto it = kv_imports_.find(conversation);
  if (it == kv_imports_.end()) return source;
  const std::string refused = it->second.get();   // posted before the turn: ready once the turn ended
  kv_imports_.erase(it);
  return refused.empty() ? source : "recomputed (" + refused + ")";
}

void Controller::request_kv_save(store::ConversationId conversation) {
  if (engine_.is_remote()) return;
  kv_in_pool_.insert(conversation);
  kv_exports_[conversation] = engine_.local().export_conversation(uint64_t(conversation));
}

void Controller::save_ready_kv() {
  for (auto it = kv_exports_.begin(); it != kv_exports_.end();) {
    if (!is_ready(it->second)) {
      ++it;
      continue;
    }
    save_exported_kv(it->first, it->second.get());
    it = kv_exports_.erase(it);
  }
  report_kv_saves();
}

void Controller::save_all_kv() {
  for (auto& [conversation, export_future] : kv_exports_) save_exported_kv(conversation, export_future.get());
  kv_exports_.clear();
  if (kv_saver_) kv_saver_->wait_idle();
}

void Controller::save_exported_kv(store::ConversationId conversation, std::optional<ConversationKv> kv) {
  if (!kv) {
    kv_in_pool_.erase(conversation);   // released under memory pressure: import it next time
    return;
  }
  kv_saver_->save(conversation, std::move(*kv));
}

void Controller::report_kv_saves() {
  for (const chat::KvSaver::Outcome& o : kv_saver_->take_outcomes()) {
    if (!o.error.empty()) {
      set_status("saving the conversation's KV failed: " + o.error, true);
    } else if (!o.result.saved) {
      set_status("the conversation's KV is larger than the saved-KV cap: not saved", false);
    }
  }
}

void Controller::forget_kv(store::ConversationId conversation) {
  kv_in_pool_.erase(conversation);
  kv_imports_.erase(conversation);
  kv_loads_.erase(conversation);   // waits for a load in flight: it reads the conversation's row
  kv_exports_.erase(conversation);
  kv_saver_->forget(conversation);   // no save of it lands after it is deleted
}

}  // namespace kvdesk::gui
