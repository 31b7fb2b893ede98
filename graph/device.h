#pragma once
// Device: where a tensor's storage lives — the CPU, or a CUDA GPU with an index. Every tensor has
// one (tensor.device()); views share their storage's. Ops never copy between devices: an op given
// tensors on two devices refuses, naming itself, the argument and both devices. Tensor::to(device),
// item(), to_vector() and printing are the copies, and say so.
//
//   tg::Device d = tg::Device::parse("cuda:0");   // "cpu", "cuda", "cuda:N"
//   tg::Tensor x = tg::randn({4, 4}).to(d);       // drawn on the CPU, copied to the GPU
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "shape.h"  // tg::detail::StringFormatter

namespace tg {

enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // which GPU (0 for the CPU)

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(t == DeviceType::kCPU ? 0 : i) {}
  static constexpr Device cpu() { return {}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  // "cpu", "cuda" (GPU 0) or "cuda:N"; anything else throws one line naming the text.
  static Device parse(std::string_view text);

  constexpr bool is_cpu() const { return type == DeviceType::kCPU; }
  constexpr bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string str() const;  // "cpu", "cuda:0"
  friend constexpr bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
};

inline constexpr Device kCPU = Device::cpu();

}  // namespace tg

template <>
struct fmt::formatter<tg::Device> : tg::detail::StringFormatter {
  template <class Ctx>
  auto format(tg::Device d, Ctx& ctx) const { return write(d.str(), ctx); }
};
