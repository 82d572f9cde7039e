// The built-in chat template families: kvdesk's Jinja source for each format its users pick by
// name (--chat-template, the app's template setting) or that a GGUF without a template gets
// (plain). Each follows its family's reference Hugging Face template for conversations without
// tools; a model's own template, when it has one, is what renders by default.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk {

struct FamilyTemplate {
  std::string_view name;
  std::string source;   // Jinja
};

// All families, "plain" first.
const std::vector<FamilyTemplate>& family_templates();
// nullptr for an unknown name.
const FamilyTemplate* find_family_template(std::string_view name);

}  // namespace kvdesk
