// A conversation's own generation settings between the store (empty values: the app's default)
// and the chat panel (every value as its answers use it, with which ones are its own), and the
// engine Request an answer is generated with. Headless: no engine thread, no window.
//
// Invariants: a stored value outside its range is never used (the app's default is, and the
// view's note says so); the context length used is never more than the model's.
#pragma once
#include <cstdint>

#include "app/store/store_types.h"
#include "engine/engine_types.h"
#include "ui/view_model.h"

namespace kvdesk::gui {

// The view of `own` over `defaults` for a model of `model_context` tokens (0: none loaded).
ui::ConversationSettingsView resolve_conversation_settings(const store::ConversationSettings& own,
                                                           const ui::SamplingView& defaults, int32_t model_context);

// What the store keeps of the view: the fields marked own, nothing else.
store::ConversationSettings own_settings(const ui::ConversationSettingsView& view);

// The sampling, length, context and retention parts of a Request. A seed of 0 is replaced by
// `random_seed`; a context length of 0 or above the model's becomes the model's (0).
void apply_generation_settings(const ui::SamplingView& values, int32_t model_context, uint64_t random_seed,
                               Request& request);

}  // namespace kvdesk::gui
