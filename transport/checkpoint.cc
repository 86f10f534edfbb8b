#include "transport/checkpoint.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <kj/exception.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <utility>

#include "transport/checkpoint.capnp.h"

namespace brigade::transport {
namespace {

namespace fs = std::filesystem;
using actors::SamplerState;

constexpr std::uint64_t kMagic = 0x54504b4347495242ULL;  // "BRIGCKPT"
constexpr std::uint32_t kFileVersion = 1;

[[noreturn]] void fail(CheckpointErrorKind kind, const fs::path& file, const std::string& reason) {
  throw CheckpointError(kind, file, reason);
}

[[noreturn]] void fail_errno(const fs::path& file, const std::string& what) {
  fail(CheckpointErrorKind::io, file, what + ": " + std::strerror(errno));
}

// An open file descriptor, closed on destruction.
class FileDescriptor {
 public:
  FileDescriptor(const fs::path& path, int flags, mode_t mode = 0)
      : fd_(::open(path.c_str(), flags, mode)) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::uint32_t crc32_of(kj::ArrayPtr<const kj::byte> bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  std::size_t done = 0;
  while (done < bytes.size()) {  // zlib takes uInt lengths
    const auto chunk = static_cast<uInt>(std::min<std::size_t>(bytes.size() - done, 1u << 30));
    crc = ::crc32(crc, bytes.begin() + done, chunk);
    done += chunk;
  }
  return static_cast<std::uint32_t>(crc);
}

// Copies bytes into word-aligned memory (Cap'n Proto readers need 8-byte alignment).
kj::Array<capnp::word> aligned_copy(const void* data, std::size_t size) {
  auto words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  std::memcpy(words.begin(), data, words.size() * sizeof(capnp::word));
  return words;
}

template <class Enum, class Schema>
Enum enum_from(Schema value, const char* what, const fs::path& file) {
  const auto raw = static_cast<std::uint16_t>(value);
  if (raw > 2)
    fail(CheckpointErrorKind::corrupt, file,
         std::string("unknown ") + what + " " + std::to_string(raw));
  return static_cast<Enum>(raw);
}

void encode_state(const SamplerState& s, schema::RankState::Builder out) {
  out.setFormatVersion(s.format_version);
  out.setGeneration(s.generation);
  auto f = out.initFingerprint();
  f.setN(s.fingerprint.n);
  f.setIdentityHash(s.fingerprint.identity_hash);
  f.setKind(static_cast<schema::SamplerKind>(s.fingerprint.kind));
  f.setSeed(s.fingerprint.seed);
  f.setNumDraws(s.fingerprint.num_draws);
  f.setWeightsHash(s.fingerprint.weights_hash);
  f.setTail(static_cast<schema::TailPolicy>(s.fingerprint.tail));
  out.setEpoch(s.epoch);
  out.setEpochLength(s.epoch_length);
  out.setWorldSize(s.world_size);
  out.setRank(s.rank);
  auto owned = out.initOwned(static_cast<unsigned>(s.owned.size()));
  for (unsigned i = 0; i < owned.size(); ++i) {
    owned[i].setStart(s.owned[i].start);
    owned[i].setStride(s.owned[i].stride);
    owned[i].setCount(s.owned[i].count);
  }
  out.setCommittedWatermark(s.committed.watermark);
  auto above = out.initCommittedAbove(static_cast<unsigned>(s.committed.above.size()));
  for (unsigned i = 0; i < above.size(); ++i) above.set(i, s.committed.above[i]);
}

SamplerState decode_state(schema::RankState::Reader in, const fs::path& file) {
  SamplerState s;
  s.format_version = in.getFormatVersion();
  if (s.format_version != SamplerState::kFormatVersion) {
    fail(CheckpointErrorKind::version, file,
         "format version " + std::to_string(s.format_version) + ", this build reads " +
             std::to_string(SamplerState::kFormatVersion));
  }
  s.generation = in.getGeneration();
  const auto f = in.getFingerprint();
  s.fingerprint.n = f.getN();
  s.fingerprint.identity_hash = f.getIdentityHash();
  s.fingerprint.kind = enum_from<actors::SamplerKind>(f.getKind(), "sampler kind", file);
  s.fingerprint.seed = f.getSeed();
  s.fingerprint.num_draws = f.getNumDraws();
  s.fingerprint.weights_hash = f.getWeightsHash();
  s.fingerprint.tail = enum_from<actors::TailPolicy>(f.getTail(), "tail policy", file);
  s.epoch = in.getEpoch();
  s.epoch_length = in.getEpochLength();
  s.world_size = in.getWorldSize();
  s.rank = in.getRank();
  for (auto r : in.getOwned()) s.owned.push_back({r.getStart(), r.getStride(), r.getCount()});
  s.committed.watermark = in.getCommittedWatermark();
  for (auto p : in.getCommittedAbove()) s.committed.above.push_back(p);
  try {
    actors::validate(s);
  } catch (const actors::SamplerStateError& e) {
    fail(CheckpointErrorKind::corrupt, file, e.what());
  }
  return s;
}

// The (rank, world size) a checkpoint file name encodes, if it is one.
std::optional<std::pair<std::uint32_t, std::uint32_t>> parse_name(const std::string& name) {
  unsigned rank = 0, world = 0;
  int consumed = 0;
  if (std::sscanf(name.c_str(), "rank-%u-of-%u.ckpt%n", &rank, &world, &consumed) != 2)
    return std::nullopt;
  if (static_cast<std::size_t>(consumed) != name.size() ||
      name != checkpoint_file_name(rank, world)) {
    return std::nullopt;
  }
  return std::make_pair(rank, world);
}

std::vector<std::byte> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_errno(path, "cannot open");
  std::vector<std::byte> bytes;
  in.seekg(0, std::ios::end);
  bytes.resize(static_cast<std::size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) fail_errno(path, "cannot read");
  return bytes;
}

struct Saved {
  fs::path path;
  SamplerState state;
};

// Checks that the files of one set describe one epoch of one dataset.
void check_consistent(const std::vector<Saved>& set) {
  const Saved& first = set.front();
  for (const Saved& s : set) {
    auto mismatch = [&](const std::string& what) {
      fail(CheckpointErrorKind::mismatched, s.path,
           what + " differs from " + first.path.filename().string());
    };
    if (auto c = actors::describe_conflict(first.state.fingerprint, s.state.fingerprint);
        !c.empty()) {
      mismatch("the dataset fingerprint (" + c + ")");
    }
    if (s.state.epoch != first.state.epoch) mismatch("the epoch");
    if (s.state.epoch_length != first.state.epoch_length) mismatch("the epoch length");
  }
}

// Every checkpoint file in DIR, decoded and checked against its name.
std::vector<Saved> read_directory(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) fail(CheckpointErrorKind::not_found, dir, "cannot list the directory: " + ec.message());
  std::vector<Saved> files;
  for (const auto& entry : it) {
    const auto name = parse_name(entry.path().filename().string());
    if (!name) continue;
    Saved saved{entry.path(), decode_checkpoint(read_file(entry.path()), entry.path())};
    if (saved.state.rank != name->first || saved.state.world_size != name->second) {
      fail(CheckpointErrorKind::mismatched, entry.path(),
           "holds the state of rank " + std::to_string(saved.state.rank) + " of " +
               std::to_string(saved.state.world_size));
    }
    files.push_back(std::move(saved));
  }
  if (files.empty()) fail(CheckpointErrorKind::not_found, dir, "no rank-<R>-of-<W>.ckpt files");
  return files;
}

using SetKey = std::pair<std::uint64_t, std::uint32_t>;  // (generation, world size)

// What keeps the set `key` from being complete, e.g. "rank-1-of-4.ckpt (missing)".
std::string describe_missing(const std::vector<Saved>& files, SetKey key) {
  std::string missing;
  for (std::uint32_t r = 0; r < key.second; ++r) {
    const auto it = std::find_if(files.begin(), files.end(), [&](const Saved& s) {
      return s.state.rank == r && s.state.world_size == key.second;
    });
    if (it != files.end() && it->state.generation == key.first) continue;
    if (!missing.empty()) missing += ", ";
    missing += checkpoint_file_name(r, key.second);
    missing += it == files.end()
                   ? " (missing)"
                   : " (holds generation " + std::to_string(it->state.generation) + ")";
  }
  return missing;
}

// The newest complete set (by rank), or a CheckpointError naming what is missing.
std::pair<SetKey, std::vector<Saved>> newest_complete_set(const fs::path& dir,
                                                          const std::vector<Saved>& files) {
  std::map<SetKey, std::map<std::uint32_t, const Saved*>, std::greater<>> sets;
  for (const auto& s : files) sets[{s.state.generation, s.state.world_size}][s.state.rank] = &s;
  const auto complete = [](const auto& entry) { return entry.second.size() == entry.first.second; };
  const auto newest = std::find_if(sets.begin(), sets.end(), complete);
  if (newest == sets.end()) {
    const SetKey key = sets.begin()->first;
    fail(CheckpointErrorKind::incomplete, dir,
         "no complete checkpoint set; the newest, generation " + std::to_string(key.first) +
             " of world size " + std::to_string(key.second) + ", lacks " +
             describe_missing(files, key));
  }
  const auto tie = std::find_if(std::next(newest), sets.end(), complete);
  if (tie != sets.end() && tie->first.first == newest->first.first) {
    fail(CheckpointErrorKind::mismatched, dir,
         "two complete sets of generation " + std::to_string(newest->first.first) +
             " (world sizes " + std::to_string(newest->first.second) + " and " +
             std::to_string(tie->first.second) + ")");
  }
  std::vector<Saved> set;
  for (const auto& [rank, saved] : newest->second) set.push_back(*saved);
  return {newest->first, std::move(set)};
}

}  // namespace

const char* to_string(CheckpointErrorKind kind) {
  switch (kind) {
    case CheckpointErrorKind::io:
      return "i/o error";
    case CheckpointErrorKind::not_found:
      return "not found";
    case CheckpointErrorKind::corrupt:
      return "corrupt";
    case CheckpointErrorKind::version:
      return "unsupported version";
    case CheckpointErrorKind::mismatched:
      return "mismatched";
    case CheckpointErrorKind::incomplete:
      return "incomplete";
    case CheckpointErrorKind::conflict:
      return "conflict";
  }
  return "unknown";
}

CheckpointError::CheckpointError(CheckpointErrorKind kind, std::filesystem::path file,
                                 const std::string& reason)
    : std::runtime_error(file.string() + ": " + to_string(kind) + ": " + reason),
      kind_(kind),
      file_(std::move(file)),
      reason_(reason) {}

std::string checkpoint_file_name(std::uint32_t rank, std::uint32_t world_size) {
  return "rank-" + std::to_string(rank) + "-of-" + std::to_string(world_size) + ".ckpt";
}

std::vector<std::byte> encode_checkpoint(const SamplerState& state) {
  capnp::MallocMessageBuilder inner;
  encode_state(state, inner.initRoot<schema::RankState>());
  const auto payload = capnp::messageToFlatArray(inner);
  const auto payload_bytes = payload.asBytes();

  capnp::MallocMessageBuilder outer;
  auto file = outer.initRoot<schema::CheckpointFile>();
  file.setMagic(kMagic);
  file.setFileVersion(kFileVersion);
  file.setCrc32(crc32_of(payload_bytes));
  file.setPayload(payload_bytes);
  const auto words = capnp::messageToFlatArray(outer);
  const auto bytes = words.asBytes();
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.begin(), bytes.size());
  return out;
}

SamplerState decode_checkpoint(std::span<const std::byte> bytes,
                               const std::filesystem::path& file) {
  if (bytes.size() % sizeof(capnp::word) != 0) {
    fail(CheckpointErrorKind::corrupt, file,
         "truncated: " + std::to_string(bytes.size()) + " bytes is not a whole number of words");
  }
  try {
    const auto words = aligned_copy(bytes.data(), bytes.size());
    capnp::FlatArrayMessageReader outer(words);
    if (outer.getEnd() != words.end())
      fail(CheckpointErrorKind::corrupt, file, "trailing bytes after the message");
    const auto root = outer.getRoot<schema::CheckpointFile>();
    if (root.getMagic() != kMagic)
      fail(CheckpointErrorKind::corrupt, file, "not a Brigade checkpoint (bad magic)");
    if (root.getFileVersion() != kFileVersion) {
      fail(CheckpointErrorKind::version, file,
           "file version " + std::to_string(root.getFileVersion()) + ", this build reads " +
               std::to_string(kFileVersion));
    }
    const auto payload = root.getPayload();
    const std::uint32_t crc = crc32_of(payload);
    if (crc != root.getCrc32()) {
      fail(CheckpointErrorKind::corrupt, file,
           "checksum mismatch (stored " + std::to_string(root.getCrc32()) + ", computed " +
               std::to_string(crc) + ")");
    }
    if (payload.size() % sizeof(capnp::word) != 0)
      fail(CheckpointErrorKind::corrupt, file, "payload is not word-aligned");
    const auto inner_words = aligned_copy(payload.begin(), payload.size());
    capnp::FlatArrayMessageReader inner(inner_words);
    return decode_state(inner.getRoot<schema::RankState>(), file);
  } catch (const kj::Exception& e) {
    fail(CheckpointErrorKind::corrupt, file,
         std::string("not a valid message: ") + e.getDescription().cStr());
  }
}

std::filesystem::path write_checkpoint(const std::filesystem::path& dir, const SamplerState& state,
                                       const WriteOptions& options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(CheckpointErrorKind::io, dir, "cannot create the directory: " + ec.message());
  const fs::path target = dir / checkpoint_file_name(state.rank, state.world_size);
  const fs::path temp =
      dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()));
  const auto bytes = encode_checkpoint(state);
  {
    FileDescriptor fd(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd.get() < 0) fail_errno(temp, "cannot create");
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail_errno(temp, "cannot write");
      done += static_cast<std::size_t>(n);
    }
    if (options.sync && ::fsync(fd.get()) != 0) fail_errno(temp, "cannot fsync");
    if (::close(fd.release()) != 0) fail_errno(temp, "cannot close");
  }
  if (::rename(temp.c_str(), target.c_str()) != 0)
    fail_errno(target, "cannot rename the temporary file into place");
  if (!options.sync) return target;
  FileDescriptor dir_fd(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd.get() < 0 || ::fsync(dir_fd.get()) != 0) fail_errno(dir, "cannot fsync the directory");
  return target;
}

LoadedCheckpoint load_checkpoint(const std::filesystem::path& dir, std::uint32_t rank,
                                 std::uint32_t world_size, const LoadOptions& options) {
  if (world_size == 0 || rank >= world_size) {
    throw std::invalid_argument("load_checkpoint: rank " + std::to_string(rank) +
                                " is not below world size " + std::to_string(world_size));
  }
  const auto [key, set] = newest_complete_set(dir, read_directory(dir));
  check_consistent(set);
  if (options.expected) {
    if (auto c = actors::describe_conflict(set.front().state.fingerprint, *options.expected);
        !c.empty()) {
      fail(CheckpointErrorKind::conflict, set.front().path, c);
    }
  }
  LoadedCheckpoint out;
  out.generation = key.first;
  out.saved_world_size = key.second;
  std::vector<SamplerState> states;
  for (const auto& s : set) {
    out.files.push_back(s.path);
    states.push_back(s.state);
  }
  if (world_size == key.second) {  // exact resume: the rank's own positions and commits
    out.state = states[rank];
    return out;
  }
  try {
    out.state = actors::repartition(states, rank, world_size);
  } catch (const actors::SamplerStateError& e) {
    fail(CheckpointErrorKind::mismatched, dir, e.what());
  }
  return out;
}

}  // namespace brigade::transport
