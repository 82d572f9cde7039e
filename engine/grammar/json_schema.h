// JSON Schema to GBNF, for structured output and tool-call arguments: the grammar's rule
// `root_name` matches JSON texts that validate against the schema, and every helper rule is
// named `root_name-...`, so the grammars of several schemas concatenate into one without a
// clash. Generated grammars read with parse_gbnf.
//
// What it covers: type (also as a list), object (properties, required, additionalProperties
// false / true / a schema; missing means extra properties are allowed, as JSON Schema says),
// array (items, prefixItems, minItems, maxItems), string (minLength, maxLength, format date,
// time, date-time, uuid), integer (minimum, maximum, exclusiveMinimum, exclusiveMaximum, exact
// through digit-range rules), number, boolean, null, enum and const of any JSON value, anyOf,
// oneOf (as anyOf), allOf of object schemas (merged), and $ref to #, #/$defs/... or
// #/definitions/... (recursive references are recursive rules). Annotations (title,
// description, default, examples, ...) are ignored. Anything else throws kvdesk::Error
// "unsupported JSON schema keyword 'X' at #/json/pointer", among them pattern, multipleOf,
// minimum/maximum on a number, and the other formats.
//
// Where the grammar is narrower than the schema, on purpose, so a sampler always finishes:
// whitespace between tokens is at most one run (a space, or a newline and up to 20 spaces or
// tabs); integers and the integer part of numbers have at most 16 digits; object properties
// come in the schema's order (an nlohmann::ordered_json keeps it), required and optional ones mixed
// as listed, extra properties after them; a string const or enum value is written only in its
// plain spelling; an extra property's name cannot begin with an escape.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace kvdesk::grammar {

// Limits for a schema from an HTTP request.
constexpr int kMaxSchemaDepth = 64;
constexpr size_t kMaxEnumValues = 10'000;
constexpr size_t kMaxSchemaGrammarBytes = size_t{1} << 20;   // what parse_gbnf takes

// Throws kvdesk::Error for an unsupported keyword (named, with its place), a $ref that does not
// resolve, a schema nothing satisfies (false, an empty integer range) and the limits above.
std::string json_schema_gbnf(const nlohmann::ordered_json& schema, std::string_view root_name = "root");
// Any JSON object, its values any JSON.
std::string json_object_gbnf(std::string_view root_name = "root");

}  // namespace kvdesk::grammar
