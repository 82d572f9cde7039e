# Sourced by tests/gpu/check.sh and measure.sh: the environment of a folder made by
# tests/gpu/bundle.sh (it holds PREBUILT): its lib/ goes on LD_LIBRARY_PATH, and `models` names
# its models/ folder.
prebuilt_env() {  # prebuilt_env BUNDLE_DIR
  local dir
  dir=$(cd "$1" && pwd)
  models="$dir/models"
  export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
