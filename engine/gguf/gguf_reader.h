// GgufFile: a read-only GGUF v2/v3 file held in memory (read once into huge pages, or mapped
// when it is large next to the free memory). Every count, length, dimension and offset in the
// file is hostile until checked against the file size and sane limits; any violation throws
// kvdesk::Error naming the file and the problem. Tensor data is used in place: tensor_data()
// points into that memory, which lives as long as the GgufFile.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ggml_types.h"

namespace kvdesk {

class LoadProgress;

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view gguf_type_name(GgufType type);

// One metadata value. Scalars keep their file type; integers widen into i (signed) or u
// (unsigned), floats into f. Arrays are homogeneous: element_type says which vector is used.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  GgufType element_type = GgufType::UINT8;  // for ARRAY
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  bool b = false;
  std::string str;
  std::vector<std::string> strings;   // ARRAY of STRING
  std::vector<double> numbers;        // ARRAY of any numeric or BOOL type
  size_t array_size() const { return element_type == GgufType::STRING ? strings.size() : numbers.size(); }
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;   // ggml order: dims[0] is the innermost (row length)
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;         // from the start of the data section
  uint64_t num_bytes = 0;
  int64_t num_elements = 0;
};

class GgufFile {
 public:
  // Throws kvdesk::Error: "<path>: <problem>". With progress, reading the file is one stage of
  // it (`read_share` of the load, by bytes read), and a cancelled load throws LoadCancelled.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  static std::unique_ptr<GgufFile> open(const std::string& path, LoadProgress& progress, double read_share);
  // The metadata and tensor infos only: the file is mapped, never read whole, so only the
  // header's pages come from disk (a model library reads hundreds of files this way). Checked
  // as open() checks; tensor_data() must not be used.
  static std::unique_ptr<GgufFile> open_metadata(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint64_t alignment() const { return alignment_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters: throw Error naming the key when it is missing or of a non-convertible type.
  std::string get_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;     // any integer type, must be >= 0
  double get_float(std::string_view key) const;      // any numeric type, must be finite
  bool get_bool(std::string_view key) const;
  const std::vector<std::string>& get_string_array(std::string_view key) const;
  const std::vector<double>& get_number_array(std::string_view key) const;
  std::optional<std::string> find_string(std::string_view key) const;
  std::optional<uint64_t> find_uint(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const uint8_t* tensor_data(const GgufTensorInfo& info) const;

  // True when the file was read into private memory (huge pages), false when it is mapped from
  // disk. Only in-memory data can be rewritten.
  bool data_in_memory() const { return in_memory_; }
  // Runs `rewrite` with the in-memory data writable, then makes it read-only again: load-time
  // repacking (kernels/weight_repack.h) writes through tensor_data() only inside it. The file
  // on disk is never written. Requires data_in_memory().
  void rewrite_tensor_data(const std::function<void()>& rewrite);

 private:
  GgufFile() = default;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t size_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  const uint8_t* map_ = nullptr;
  bool in_memory_ = false;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  friend class GgufParser;
};

}  // namespace kvdesk
