#pragma once
// The mutations the decoders of untrusted Cap'n Proto bytes are tested with (the remote
// protocol's in tests/transport/remote/wire_test.cc, the decode operation's in
// tests/launch/loader/decode_task_test.cc): round % 4 picks flipped bits, a truncation
// (to a word boundary or not), random words, or random bytes of a random length.

#include <random>
#include <vector>

namespace brigade::transport::test {

inline std::vector<char> mutated(const std::vector<char>& valid, int round, std::mt19937& random) {
  std::vector<char> bytes = valid;
  switch (round % 4) {
    case 0:  // flipped bits
      for (int i = 0, n = 1 + int(random() % 6); i < n; ++i)
        bytes[random() % bytes.size()] ^= char(1u << (random() % 8));
      break;
    case 1:  // truncated (to a word boundary or not)
      bytes.resize(random() % bytes.size());
      break;
    case 2:  // random words
      for (int i = 0, n = 1 + int(random() % 3); i < n; ++i) {
        const auto at = (random() % (bytes.size() / 8)) * 8;
        for (int k = 0; k < 8; ++k) bytes[at + k] = char(random());
      }
      break;
    default:  // random bytes of a random length
      bytes.resize(8 * (random() % 64));
      for (auto& c : bytes) c = char(random());
  }
  return bytes;
}

}  // namespace brigade::transport::test
