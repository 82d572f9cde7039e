// GGUF v3 writing as ggml lays it out: header, metadata in insertion order, tensor infos,
// zero padding to the alignment, then each tensor's data (from its producer, one at a time)
// padded to the alignment. The file appears under its name only when complete: it is written
// to path.tmp and renamed, and a failed write removes the .tmp.
#include "engine/lab/gguf_writer.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <system_error>

#include "engine/error.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF files are written little-endian");

constexpr uint32_t kGgufVersion = 3;
constexpr uint32_t kDefaultAlignment = 32;
constexpr size_t kMaxTensorNameBytes = 63;  // ggml's GGML_MAX_NAME (64) counts the NUL
constexpr size_t kMaxDims = 4;
constexpr int64_t kMaxTensorElements = int64_t{1} << 48;  // the most GgufFile reads back
constexpr std::string_view kAlignmentKey = "general.alignment";

uint64_t align_up(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// OutputFile: the .tmp file being written. Until commit() has renamed it into place it owns
// the file and removes it when destroyed, so an I/O error or a throwing producer leaves no
// partial file behind. written_ counts every byte handed to it.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path) : path_(path), tmp_path_(path + ".tmp") {
    file_ = std::fopen(tmp_path_.c_str(), "wb");
    if (file_ == nullptr) fail("cannot create " + tmp_path_);
  }
  ~OutputFile() {
    if (file_ != nullptr) std::fclose(file_);
    if (!committed_) std::remove(tmp_path_.c_str());
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  uint64_t position() const { return written_; }

  void write(const void* data, size_t bytes) {
    if (bytes != 0 && std::fwrite(data, 1, bytes, file_) != bytes)
      fail("cannot write " + tmp_path_);
    written_ += bytes;
  }

  template <typename T>
  void put(T value) {
    write(&value, sizeof(T));
  }

  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    write(s.data(), s.size());
  }

  void pad_to(uint64_t alignment) {
    static constexpr char kZeros[256] = {};
    uint64_t missing = align_up(written_, alignment) - written_;
    while (missing > 0) {
      const size_t chunk = std::min<uint64_t>(missing, sizeof(kZeros));
      write(kZeros, chunk);
      missing -= chunk;
    }
  }

  void commit() {
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) fail("cannot write " + tmp_path_);
    std::FILE* file = file_;
    file_ = nullptr;
    if (std::fclose(file) != 0) fail("cannot write " + tmp_path_);
    if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) fail("cannot rename " + tmp_path_);
    committed_ = true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    const int err = errno;
    throw Error(path_ + ": " + what + ": " + std::system_category().message(err));
  }

  std::string path_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
  uint64_t written_ = 0;
  bool committed_ = false;
};

void add_entry(std::vector<std::pair<std::string, GgufValue>>& metadata, const std::string& key,
               GgufValue value) {
  KVDESK_ASSERT(key != kAlignmentKey);
  for (const auto& entry : metadata) KVDESK_ASSERT(entry.first != key);
  metadata.emplace_back(key, std::move(value));
}

GgufValue scalar(GgufType type) {
  GgufValue value;
  value.type = type;
  return value;
}

GgufValue array(GgufType element_type) {
  GgufValue value = scalar(GgufType::ARRAY);
  value.element_type = element_type;
  return value;
}

// Writes only the types GgufWriter's add_ functions create.
void put_array(OutputFile& out, const GgufValue& value) {
  out.put<uint32_t>(static_cast<uint32_t>(value.element_type));
  out.put<uint64_t>(value.array_size());
  switch (value.element_type) {
    case GgufType::STRING:
      for (const std::string& s : value.strings) out.put_string(s);
      break;
    case GgufType::FLOAT32:
      for (double x : value.numbers) out.put<float>(static_cast<float>(x));
      break;
    case GgufType::INT32:
      for (double x : value.numbers) out.put<int32_t>(static_cast<int32_t>(x));
      break;
    default:
      KVDESK_ASSERT(!"array element type the writer does not create");
  }
}

void put_value(OutputFile& out, const GgufValue& value) {
  out.put<uint32_t>(static_cast<uint32_t>(value.type));
  switch (value.type) {
    case GgufType::STRING:
      out.put_string(value.str);
      break;
    case GgufType::UINT32:
      out.put<uint32_t>(static_cast<uint32_t>(value.u));
      break;
    case GgufType::INT32:
      out.put<int32_t>(static_cast<int32_t>(value.i));
      break;
    case GgufType::FLOAT32:
      out.put<float>(static_cast<float>(value.f));
      break;
    case GgufType::BOOL:
      out.put<uint8_t>(value.b ? 1 : 0);
      break;
    case GgufType::ARRAY:
      put_array(out, value);
      break;
    default:
      KVDESK_ASSERT(!"value type the writer does not create");
  }
}

}  // namespace

void GgufWriter::add_string(const std::string& key, const std::string& value) {
  GgufValue v = scalar(GgufType::STRING);
  v.str = value;
  add_entry(metadata_, key, std::move(v));
}

void GgufWriter::add_uint32(const std::string& key, uint32_t value) {
  GgufValue v = scalar(GgufType::UINT32);
  v.u = value;
  add_entry(metadata_, key, std::move(v));
}

void GgufWriter::add_int32(const std::string& key, int32_t value) {
  GgufValue v = scalar(GgufType::INT32);
  v.i = value;
  add_entry(metadata_, key, std::move(v));
}

void GgufWriter::add_float32(const std::string& key, float value) {
  GgufValue v = scalar(GgufType::FLOAT32);
  v.f = value;
  add_entry(metadata_, key, std::move(v));
}

void GgufWriter::add_bool(const std::string& key, bool value) {
  GgufValue v = scalar(GgufType::BOOL);
  v.b = value;
  add_entry(metadata_, key, std::move(v));
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  GgufValue v = array(GgufType::STRING);
  v.strings = values;
  add_entry(metadata_, key, std::move(v));
}

void GgufWriter::add_float32_array(const std::string& key, const std::vector<float>& values) {
  GgufValue v = array(GgufType::FLOAT32);
  v.numbers.assign(values.begin(), values.end());
  add_entry(metadata_, key, std::move(v));
}

void GgufWriter::add_int32_array(const std::string& key, const std::vector<int32_t>& values) {
  GgufValue v = array(GgufType::INT32);
  v.numbers.assign(values.begin(), values.end());
  add_entry(metadata_, key, std::move(v));
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims,
                            TensorProducer produce) {
  KVDESK_ASSERT(!name.empty() && name.size() <= kMaxTensorNameBytes);
  for (const TensorDecl& t : tensors_) KVDESK_ASSERT(t.name != name);
  KVDESK_ASSERT(!dims.empty() && dims.size() <= kMaxDims);
  int64_t elements = 1;
  for (int64_t dim : dims) {
    KVDESK_ASSERT(dim > 0 && !__builtin_mul_overflow(elements, dim, &elements));
  }
  KVDESK_ASSERT(elements <= kMaxTensorElements);
  KVDESK_ASSERT(dims[0] % ggml_type_info(type).block_values == 0);
  KVDESK_ASSERT(produce != nullptr);
  tensors_.push_back({name, type, std::move(dims), std::move(produce)});
}

void GgufWriter::write(const std::string& path, uint32_t alignment) const {
  KVDESK_ASSERT(alignment >= 8 && (alignment & (alignment - 1)) == 0);
  const auto tensor_bytes = [](const TensorDecl& t) {
    uint64_t bytes = ggml_row_bytes(t.type, t.dims[0]);
    for (size_t d = 1; d < t.dims.size(); ++d) bytes *= static_cast<uint64_t>(t.dims[d]);
    return bytes;
  };
  const bool alignment_key = alignment != kDefaultAlignment;

  OutputFile out(path);
  out.write("GGUF", 4);
  out.put<uint32_t>(kGgufVersion);
  out.put<uint64_t>(tensors_.size());
  out.put<uint64_t>(metadata_.size() + (alignment_key ? 1 : 0));
  for (const auto& [key, value] : metadata_) {
    out.put_string(key);
    put_value(out, value);
  }
  if (alignment_key) {
    GgufValue value = scalar(GgufType::UINT32);
    value.u = alignment;
    out.put_string(kAlignmentKey);
    put_value(out, value);
  }

  uint64_t offset = 0;  // from the start of the data section
  for (const TensorDecl& t : tensors_) {
    out.put_string(t.name);
    out.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (int64_t dim : t.dims) out.put<int64_t>(dim);
    out.put<uint32_t>(static_cast<uint32_t>(t.type));
    out.put<uint64_t>(offset);
    offset = align_up(offset + tensor_bytes(t), alignment);
  }
  out.pad_to(alignment);

  std::vector<uint8_t> buffer;
  for (const TensorDecl& t : tensors_) {
    buffer.clear();
    t.produce(buffer);
    KVDESK_ASSERT(buffer.size() == tensor_bytes(t));
    out.write(buffer.data(), buffer.size());
    out.pad_to(alignment);
  }
  out.commit();
}

}  // namespace kvdesk
