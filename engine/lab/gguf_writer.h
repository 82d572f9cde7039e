// GgufWriter: writes a GGUF v3 file that other readers (llama.cpp's gguf.cpp) accept.
// Metadata is kept in memory; tensor data is produced by a callback at write time, so a
// multi-gigabyte model is streamed to disk one tensor at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/ggml_types.h"
#include "engine/gguf/gguf_reader.h"

namespace kvdesk {

class GgufWriter {
 public:
  // Keys are unique and go to the file in the order added; general.alignment is write()'s.
  void add_string(const std::string& key, const std::string& value);
  void add_uint32(const std::string& key, uint32_t value);
  void add_int32(const std::string& key, int32_t value);
  void add_float32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  void add_float32_array(const std::string& key, const std::vector<float>& values);
  void add_int32_array(const std::string& key, const std::vector<int32_t>& values);

  // produce(out) gets out empty and must fill it with exactly ggml_row_bytes(type, dims[0]) * rows
  // bytes (rows: the product of dims[1..]). Names are unique and at most 63 bytes (ggml's limit).
  using TensorProducer = std::function<void(std::vector<uint8_t>& out)>;
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims,
                  TensorProducer produce);

  // Throws kvdesk::Error on I/O failure; writes to path + ".tmp" then renames. Writes
  // general.alignment itself when alignment (a power of two, 8 or more) is not the default 32.
  void write(const std::string& path, uint32_t alignment = 32) const;

 private:
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  struct TensorDecl {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    TensorProducer produce;
  };
  std::vector<TensorDecl> tensors_;
};

}  // namespace kvdesk
