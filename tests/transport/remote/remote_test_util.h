#pragma once

// What the remote layer's tests share: the job token, byte helpers and the "upper"
// operation (the task's text in upper case) that stands in for real work.

#include <cctype>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/remote/remote.h"

namespace brigade::transport::test {

inline const Security kSecurity{.token = "the job's token"};

inline std::vector<char> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }
inline std::string text_of(const std::vector<char>& v) { return {v.begin(), v.end()}; }

// "upper": the task's text in upper case.
inline OperationRegistry upper_ops() {
  OperationRegistry ops;
  ops.add({"upper", 1}, [](std::span<const char> task, const OperationContext&) {
    std::vector<char> out(task.begin(), task.end());
    for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
  });
  return ops;
}

}  // namespace brigade::transport::test
