#include "transport/device/device.h"

#include <charconv>
#include <stdexcept>

#include "transport/device/detail/device_cpu.h"
#include "transport/device/detail/device_cuda.h"

namespace brigade::transport {

DeviceSpec parse_device(std::string_view text) {
  if (text == "cpu") return {DeviceKind::cpu, 0};
  if (text == "cuda") return {DeviceKind::cuda, 0};
  constexpr std::string_view prefix = "cuda:";
  if (text.starts_with(prefix)) {
    const auto digits = text.substr(prefix.size());
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (!digits.empty() && ec == std::errc() && end == digits.data() + digits.size() &&
        index >= 0) {
      return {DeviceKind::cuda, index};
    }
  }
  throw std::invalid_argument("invalid device '" + std::string(text) +
                              "': expected cpu, cuda or cuda:N (N ≥ 0)");
}

std::string to_string(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::cpu) return "cpu";
  return "cuda:" + std::to_string(spec.index);
}

bool built_with_cuda() { return detail::cuda_compiled(); }
bool built_with_nccl() { return detail::nccl_compiled(); }
CudaAvailability cuda_availability() { return detail::cuda_probe(); }

namespace {

class DeviceCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "brigade.device"; }
  std::string message(int value) const override {
    switch (static_cast<DeviceErrc>(value)) {
      case DeviceErrc::failed:
        return "device error";
      case DeviceErrc::unsupported:
        return "device not supported";
      case DeviceErrc::peer_lost:
        return "a peer of the collective was lost";
    }
    return "unknown device error";
  }
  std::error_condition default_error_condition(int value) const noexcept override {
    switch (static_cast<DeviceErrc>(value)) {
      case DeviceErrc::failed:
        return std::errc::io_error;
      case DeviceErrc::unsupported:
        return std::errc::not_supported;
      case DeviceErrc::peer_lost:
        return std::errc::connection_aborted;
    }
    return {value, *this};
  }
};

}  // namespace

const std::error_category& device_category() noexcept {
  static const DeviceCategory category;
  return category;
}

std::error_code make_error_code(DeviceErrc code) noexcept {
  return {static_cast<int>(code), device_category()};
}

std::string_view device_code_name(DeviceErrc code) {
  switch (code) {
    case DeviceErrc::failed:
      return "failed";
    case DeviceErrc::unsupported:
      return "unsupported";
    case DeviceErrc::peer_lost:
      return "peer_lost";
  }
  return "unknown";
}

DeviceError::DeviceError(std::string library, std::string code, std::string call, DeviceSpec device,
                         std::string message, DeviceErrc kind)
    : std::system_error(make_error_code(kind)),
      text_(library + " error " + code + " (" + message + ") in " + call + " on " +
            to_string(device)),
      library_(std::move(library)),
      code_(std::move(code)),
      call_(std::move(call)),
      device_(device),
      message_(std::move(message)) {}

bool DeviceError::transient() const { return error_code() == DeviceErrc::peer_lost; }

std::shared_ptr<Device> open_device(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::cpu) return std::make_shared<detail::CpuDevice>();
  return detail::open_cuda_device(spec.index);
}

}  // namespace brigade::transport
