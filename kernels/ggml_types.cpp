// The ggml type table: block geometry for every id a GGUF file may name.
#include "kernels/ggml_types.h"

#include <array>

#include "kernels/check.h"

namespace kvdesk {
namespace {

struct Row {
  uint32_t id;
  GgmlTypeInfo info;
};

// Block sizes and byte counts as ggml defines them (QK_K = 256 for the K-quants).
constexpr std::array kTypes = {
    Row{0, {"f32", 1, 4, true}},        Row{1, {"f16", 1, 2, true}},
    Row{2, {"q4_0", 32, 18, true}},     Row{3, {"q4_1", 32, 20, true}},
    Row{6, {"q5_0", 32, 22, true}},    Row{7, {"q5_1", 32, 24, true}},
    Row{8, {"q8_0", 32, 34, true}},     Row{9, {"q8_1", 32, 36, false}},
    Row{10, {"q2_K", 256, 84, true}},   Row{11, {"q3_K", 256, 110, true}},
    Row{12, {"q4_K", 256, 144, true}}, Row{13, {"q5_K", 256, 176, true}},
    Row{14, {"q6_K", 256, 210, true}}, Row{15, {"q8_K", 256, 292, false}},
    Row{16, {"iq2_xxs", 256, 66, false}}, Row{17, {"iq2_xs", 256, 74, false}},
    Row{18, {"iq3_xxs", 256, 98, false}}, Row{19, {"iq1_s", 256, 50, false}},
    Row{20, {"iq4_nl", 32, 18, true}},   Row{21, {"iq3_s", 256, 110, false}},
    Row{22, {"iq2_s", 256, 82, false}},  Row{23, {"iq4_xs", 256, 136, true}},
    Row{24, {"i8", 1, 1, false}},        Row{25, {"i16", 1, 2, false}},
    Row{26, {"i32", 1, 4, false}},       Row{27, {"i64", 1, 8, false}},
    Row{28, {"f64", 1, 8, false}},       Row{29, {"iq1_m", 256, 56, false}},
    Row{30, {"bf16", 1, 2, true}},       Row{34, {"tq1_0", 256, 54, false}},
    Row{35, {"tq2_0", 256, 66, false}},  Row{39, {"mxfp4", 32, 17, true}},
    Row{1000, {"q4_0x8", 32, 18, true, false}},  Row{1001, {"q4_kx8", 256, 144, true, false}},
    Row{1002, {"q6_kx8", 256, 210, true, false}}, Row{1003, {"q8_0x8", 32, 34, true, false}},
    Row{1004, {"q5_kx8", 256, 176, true, false}}, Row{1005, {"iq4_xsx8", 256, 136, true, false}},
    Row{1006, {"iq4_nlx8", 32, 18, true, false}}, Row{1007, {"q3_kx8", 256, 110, true, false}},
    Row{1008, {"q2_kx8", 256, 84, true, false}}, Row{1009, {"q5_0x8", 32, 22, true, false}},
    Row{1010, {"q5_1x8", 32, 24, true, false}}, Row{1011, {"q4_1x8", 32, 20, true, false}},
    Row{1012, {"mxfp4x8", 32, 17, true, false}},
};

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t raw_type) {
  for (const Row& row : kTypes) {
    if (row.id == raw_type) return &row.info;
  }
  return nullptr;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  KVDESK_ASSERT(info != nullptr);
  return *info;
}

size_t ggml_row_bytes(GgmlType type, int64_t n) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  KVDESK_ASSERT(n % info.block_values == 0);
  return static_cast<size_t>(n / info.block_values * info.block_bytes);
}

}  // namespace kvdesk
