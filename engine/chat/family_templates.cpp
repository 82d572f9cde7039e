// Each family's source, written the way its reference template writes it (named above it), so
// the Jinja engine renders the family as the model's own template would for plain
// conversations.
#include "engine/chat/family_templates.h"

namespace kvdesk {
namespace {

// Messages joined by newlines; an answer continues the text before it directly (the model's
// answer continued it), so a model without a template simply continues the story.
constexpr std::string_view kPlain = R"jinja({%- for message in messages -%}
{%- if message.role not in ['system', 'user', 'assistant', 'tool'] -%}
{{- raise_exception('unknown chat role \'' ~ message.role ~ '\' (use system, user, assistant or tool)') -}}
{%- endif -%}
{%- if not loop.first and message.role != 'assistant' %}{{ '\n' }}{% endif -%}
{{- message.content -}}
{%- endfor -%})jinja";

// Qwen2 / Qwen2.5 without their default system message.
constexpr std::string_view kChatML = R"jinja({% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})jinja";

// Llama-2-7b-chat-hf (its alternation check left out: kvdesk renders what the user built).
constexpr std::string_view kLlama2 = R"jinja({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})jinja";

// Meta-Llama-3-8B-Instruct.
constexpr std::string_view kLlama3 = R"jinja({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})jinja";

// HuggingFaceH4/zephyr-7b-beta, TinyLlama-1.1B-Chat-v1.0.
constexpr std::string_view kZephyr = R"jinja({% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>\n'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %})jinja";

// Mistral-7B-Instruct-v0.3 (tekken: Mistral-Nemo-Instruct-2407, without the spaces): the system
// prompt goes before the user message that is the last message of all.
constexpr std::string_view kMistral = R"jinja({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"] + eos_token}}
    {%- endif %}
{%- endfor %})jinja";

constexpr std::string_view kMistralTekken = R"jinja({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST]" + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST]" + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- message["content"] + eos_token}}
    {%- endif %}
{%- endfor %})jinja";

// Mistral-7B-Instruct-v0.2 and Mixtral-8x7B-Instruct-v0.1: the system prompt starts the first
// user turn.
constexpr std::string_view kMistralV1 = R"jinja({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- endif %}
{%- endfor %})jinja";

// Their first template, as older GGUFs carry it (a system message merged the same way).
constexpr std::string_view kMistralV1Unspaced = R"jinja({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- '[INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token}}
    {%- endif %}
{%- endfor %})jinja";

// gemma-3-it: the system prompt starts the first turn; the assistant is "model".
constexpr std::string_view kGemma = R"jinja({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {{- message['content'] | trim }}
    {{- '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%})jinja";

// Phi-3-mini-4k-instruct.
constexpr std::string_view kPhi3 = R"jinja({% for message in messages %}{{'<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %})jinja";

// Phi-4-mini-instruct without tools: Phi-3's tags without the line breaks.
constexpr std::string_view kPhi4Mini = R"jinja({% for message in messages %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %})jinja";

// phi-4: ChatML with <|im_sep|> after the role and no newlines.
constexpr std::string_view kPhi4 = R"jinja({% for message in messages %}{{'<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + '<|im_end|>'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %})jinja";

// Qwen3 without tools: an answer after the last user message keeps its thinking, earlier ones
// only their answer. The thinking variant (Qwen3-*-Thinking-2507, QwQ) opens <think> itself.
constexpr std::string_view kQwen3Turns = R"jinja({%- set ns = namespace(last_query_index=0) %}
{%- for message in messages %}
    {%- if message.role == 'user' %}{%- set ns.last_query_index = loop.index0 %}{%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.role != 'assistant' %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
    {%- else %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if '</think>' in content %}
            {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index and (loop.last or reasoning_content) %}
            {{- '<|im_start|>assistant\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
        {%- else %}
            {{- '<|im_start|>assistant\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %})jinja";
constexpr std::string_view kQwen3End = R"jinja(
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %})jinja";
constexpr std::string_view kQwen3ThinkingEnd = R"jinja(
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n<think>\n' }}{%- endif %})jinja";

// granite-3.x-instruct without tools, documents or its dated default system message.
constexpr std::string_view kGranite = R"jinja({%- for message in messages %}
    {{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %})jinja";

// Mistral v7 / tekken (Mistral-Small-24B-Instruct-2501) without its default system message.
constexpr std::string_view kMistralV7 = R"jinja({{- bos_token }}
{%- for message in messages %}
    {%- if message['role'] == 'user' %}
        {{- '[INST]' + message['content'] + '[/INST]' }}
    {%- elif message['role'] == 'system' %}
        {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token }}
    {%- endif %}
{%- endfor %})jinja";

// DeepSeek-R1-Distill-Qwen / -Llama without tools (R1: the answer opened with <think>; the
// DeepSeek form of V3 and R1-0528 ends with the assistant tag alone): the last system
// message's content right after BOS; an answer keeps what follows its last </think>.
constexpr std::string_view kDeepSeekTurns = R"jinja({%- set ns = namespace(system_prompt='') %}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}{%- set ns.system_prompt = message['content'] %}{%- endif %}
{%- endfor %}
{{- bos_token }}{{- ns.system_prompt }}
{%- for message in messages %}
    {%- if message['role'] == 'user' %}
        {{- '<｜User｜>' + message['content'] }}
    {%- elif message['role'] == 'assistant' %}
        {%- set content = message['content'] %}
        {%- if '</think>' in content %}{%- set content = content.split('</think>')[-1] %}{%- endif %}
        {{- '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' }}
    {%- endif %}
{%- endfor %})jinja";
constexpr std::string_view kDeepSeekEnd = R"jinja(
{%- if add_generation_prompt %}{{- '<｜Assistant｜>' }}{%- endif %})jinja";
constexpr std::string_view kDeepSeekR1End = R"jinja(
{%- if add_generation_prompt %}{{- '<｜Assistant｜><think>\n' }}{%- endif %})jinja";

// gpt-oss's harmony template without tools, reasoning_effort or model_identity: its dated
// system message, the first system message as the developer's instructions, users and answers
// as messages; an answer keeps only its final channel (its text after the last final-channel
// header or </think>), later system messages are not rendered.
constexpr std::string_view kHarmony = R"jinja({{- "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: " + strftime_now("%Y-%m-%d") + "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>" }}
{%- if messages[0].role == 'system' and messages[0].content %}
    {{- "<|start|>developer<|message|># Instructions\n\n" + messages[0].content + "\n\n<|end|>" }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'user' %}
        {{- "<|start|>user<|message|>" + message.content + "<|end|>" }}
    {%- elif message.role == 'assistant' %}
        {%- set content = message.content %}
        {%- if '<|channel|>final<|message|>' in content %}
            {%- set content = content.split('<|channel|>final<|message|>')[-1] %}
            {%- if content.endswith('<|end|>') or content.endswith('<|return|>') %}{%- set content = content.split('<|')[0] %}{%- endif %}
        {%- elif '</think>' in content %}
            {%- set content = content.split('</think>')[-1].lstrip() %}
        {%- endif %}
        {{- "<|start|>assistant<|channel|>final<|message|>" + content + "<|end|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- "<|start|>assistant" }}{%- endif %})jinja";

}  // namespace

const std::vector<FamilyTemplate>& family_templates() {
  static const std::vector<FamilyTemplate> families = {
      {"plain", std::string(kPlain)},
      {"chatml", std::string(kChatML)},
      {"llama2", std::string(kLlama2)},
      {"llama3", std::string(kLlama3)},
      {"zephyr", std::string(kZephyr)},
      {"mistral", std::string(kMistral)},
      {"gemma", std::string(kGemma)},
      {"phi3", std::string(kPhi3)},
      {"qwen3", std::string(kQwen3Turns) + std::string(kQwen3End)},
      {"phi4", std::string(kPhi4)},
      {"granite", std::string(kGranite)},
      {"mistral-v7", std::string(kMistralV7)},
      {"deepseek", std::string(kDeepSeekTurns) + std::string(kDeepSeekEnd)},
      {"deepseek-r1", std::string(kDeepSeekTurns) + std::string(kDeepSeekR1End)},
      {"phi4-mini", std::string(kPhi4Mini)},
      {"mistral-tekken", std::string(kMistralTekken)},
      {"qwen3-thinking", std::string(kQwen3Turns) + std::string(kQwen3ThinkingEnd)},
      {"harmony", std::string(kHarmony)},
      {"mistral-v1", std::string(kMistralV1)},
      {"mistral-v1-unspaced", std::string(kMistralV1Unspaced)},
  };
  return families;
}

const FamilyTemplate* find_family_template(std::string_view name) {
  for (const FamilyTemplate& f : family_templates()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace kvdesk
