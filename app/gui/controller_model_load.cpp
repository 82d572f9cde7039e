// Controller, model loading: the engine's progress events move the model bar's progress bar,
// and Cancel asks the engine to stop the load. A cancelled load leaves no model open (the
// engine lets the old model go before it reads the new one, so two never share memory); the
// model bar says so and the recent models are one click away.
#include "app/gui/controller.h"

#include "engine/error.h"

namespace kvdesk::gui {

void Controller::on_load_progress(double fraction) {
  if (vm_.model.state != ui::ModelState::Loading) return;
  vm_.model.load_progress = fraction;
}

void Controller::cancel_model_load() {
  if (vm_.model.state != ui::ModelState::Loading) throw Error("no model is loading");
  engine_.local().cancel_load();
  set_status("cancelling the load of " + vm_.model.path, false);
}

void Controller::on_load_cancelled(const std::string& message) {
  const std::string path = vm_.model.path;
  ui::ModelView none;
  none.recent = vm_.model.recent;
  vm_.model = std::move(none);
  set_status(message + " (" + path + "); no model is open", false);
}

}  // namespace kvdesk::gui
