#include "transport/checkpoint/checkpoint.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <kj/exception.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>

#include "transport/checkpoint/checkpoint.capnp.h"
#include "transport/files/files.h"

namespace brigade::transport {
namespace {

namespace fs = std::filesystem;
using actors::MixState;
using actors::PositionRun;
using actors::SamplerState;

constexpr std::uint64_t kMagic = 0x54504b4347495242ULL;  // "BRIGCKPT"
constexpr std::uint32_t kFileVersion = 1;

[[noreturn]] void fail(CheckpointErrorKind kind, const fs::path& file, const std::string& reason) {
  throw CheckpointError(kind, file, reason);
}

[[noreturn]] void fail_errno(const fs::path& file, const std::string& what) {
  fail(CheckpointErrorKind::io, file, what + ": " + std::strerror(errno));
}

// A temporary file that is removed on destruction unless it was renamed into place.
class TempFile {
 public:
  explicit TempFile(fs::path path) : path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  const fs::path& path() const { return path_; }
  void published() { path_.clear(); }

 private:
  fs::path path_;
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

// The largest value of each enum a checkpoint stores.
template <class Enum>
constexpr std::uint16_t kMaxEnum = 0;
template <>
constexpr std::uint16_t kMaxEnum<actors::SamplerKind> = 3;  // blocks
template <>
constexpr std::uint16_t kMaxEnum<actors::TailPolicy> = 2;  // pad
template <>
constexpr std::uint16_t kMaxEnum<actors::MixStop> = 3;  // total_count

template <class Enum, class Schema>
Enum enum_from(Schema value, const char* what, const fs::path& file) {
  const auto raw = static_cast<std::uint16_t>(value);
  if (raw > kMaxEnum<Enum>)
    fail(CheckpointErrorKind::corrupt, file,
         std::string("unknown ") + what + " " + std::to_string(raw));
  return static_cast<Enum>(raw);
}

// ---- encoding

void encode_runs(const std::vector<PositionRun>& runs,
                 capnp::List<schema::PositionRun>::Builder out) {
  for (unsigned i = 0; i < out.size(); ++i) {
    out[i].setStart(runs[i].start);
    out[i].setStride(runs[i].stride);
    out[i].setCount(runs[i].count);
  }
}

void encode_fingerprint(const actors::DatasetFingerprint& f,
                        schema::DatasetFingerprint::Builder out) {
  out.setN(f.n);
  out.setIdentityHash(f.identity_hash);
  out.setKind(static_cast<schema::SamplerKind>(f.kind));
  out.setSeed(f.seed);
  out.setNumDraws(f.num_draws);
  out.setWeightsHash(f.weights_hash);
  out.setTail(static_cast<schema::TailPolicy>(f.tail));
}

// The fields samplers and mixes share.
template <class State>
void encode_common(const State& s, std::uint32_t format_version, const RunId& run,
                   schema::RankState::Builder out) {
  out.setFormatVersion(format_version);
  out.setGeneration(s.generation);
  out.setEpoch(s.epoch);
  out.setWorldSize(s.world_size);
  out.setRank(s.rank);
  encode_runs(s.owned, out.initOwned(static_cast<unsigned>(s.owned.size())));
  out.setCommittedWatermark(s.committed.watermark);
  auto above = out.initCommittedAbove(static_cast<unsigned>(s.committed.above.size()));
  for (unsigned i = 0; i < above.size(); ++i) above.set(i, s.committed.above[i]);
  out.setJobId(run.job);
  out.setRunId(run.run);
  auto planned = out.initPlanned(static_cast<unsigned>(s.planned.size()));
  for (unsigned i = 0; i < planned.size(); ++i) {
    const auto& p = s.planned[i];
    planned[i].setEpochLength(p.epoch_length);
    planned[i].setEpochWorldSize(p.epoch_world_size);
    encode_runs(p.owned, planned[i].initOwned(static_cast<unsigned>(p.owned.size())));
  }
}

void encode_state(const SamplerState& s, const RunId& run, schema::RankState::Builder out) {
  encode_common(s, s.format_version, run, out);
  encode_fingerprint(s.fingerprint, out.initFingerprint());
  out.setEpochLength(s.epoch_length);
}

void encode_state(const MixState& s, const RunId& run, schema::RankState::Builder out) {
  encode_common(s, SamplerState::kFormatVersion, run, out);
  auto mix = out.initMix();
  const auto& f = s.fingerprint;
  auto sources = mix.initSources(static_cast<unsigned>(f.sources.size()));
  for (unsigned i = 0; i < sources.size(); ++i) encode_fingerprint(f.sources[i], sources[i]);
  auto weights = mix.initWeights(static_cast<unsigned>(f.weights.size()));
  for (unsigned i = 0; i < weights.size(); ++i) weights.set(i, f.weights[i]);
  mix.setSeed(f.seed);
  mix.setStop(static_cast<schema::MixStop>(f.stop));
  mix.setCount(f.count);
  mix.setEpochWorldSize(s.epoch_world_size);
  mix.setOwnSequence(s.own_sequence);
}

template <class State>
std::vector<std::byte> encode(const State& state, const RunId& run) {
  capnp::MallocMessageBuilder inner;
  encode_state(state, run, inner.initRoot<schema::RankState>());
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

// ---- decoding

std::vector<PositionRun> decode_runs(capnp::List<schema::PositionRun>::Reader in) {
  std::vector<PositionRun> out;
  for (auto r : in) out.push_back({r.getStart(), r.getStride(), r.getCount()});
  return out;
}

actors::DatasetFingerprint decode_fingerprint(schema::DatasetFingerprint::Reader f,
                                              const fs::path& file) {
  actors::DatasetFingerprint out;
  out.n = f.getN();
  out.identity_hash = f.getIdentityHash();
  out.kind = enum_from<actors::SamplerKind>(f.getKind(), "sampler kind", file);
  out.seed = f.getSeed();
  out.num_draws = f.getNumDraws();
  out.weights_hash = f.getWeightsHash();
  out.tail = enum_from<actors::TailPolicy>(f.getTail(), "tail policy", file);
  return out;
}

template <class State>
void decode_common(schema::RankState::Reader in, State& s) {
  s.generation = in.getGeneration();
  s.epoch = in.getEpoch();
  s.world_size = in.getWorldSize();
  s.rank = in.getRank();
  s.owned = decode_runs(in.getOwned());
  s.committed.watermark = in.getCommittedWatermark();
  for (auto p : in.getCommittedAbove()) s.committed.above.push_back(p);
  for (auto p : in.getPlanned())
    s.planned.push_back({p.getEpochLength(), p.getEpochWorldSize(), decode_runs(p.getOwned())});
}

DecodedCheckpoint decode_rank_state(schema::RankState::Reader in, const fs::path& file) {
  const std::uint32_t version = in.getFormatVersion();
  if (version < SamplerState::kOldestFormatVersion || version > SamplerState::kFormatVersion) {
    fail(CheckpointErrorKind::version, file,
         "format version " + std::to_string(version) + ", this build reads " +
             std::to_string(SamplerState::kOldestFormatVersion) + " to " +
             std::to_string(SamplerState::kFormatVersion));
  }
  DecodedCheckpoint out;
  out.job = in.getJobId();
  out.run = in.getRunId();
  try {
    if (in.hasMix()) {
      MixState s;
      decode_common(in, s);
      const auto mix = in.getMix();
      for (auto f : mix.getSources()) s.fingerprint.sources.push_back(decode_fingerprint(f, file));
      for (double w : mix.getWeights()) s.fingerprint.weights.push_back(w);
      s.fingerprint.seed = mix.getSeed();
      s.fingerprint.stop = enum_from<actors::MixStop>(mix.getStop(), "mix stop policy", file);
      s.fingerprint.count = mix.getCount();
      s.epoch_world_size = mix.getEpochWorldSize();
      s.own_sequence = mix.getOwnSequence();
      actors::validate(s);
      out.mix = std::move(s);
    } else {
      SamplerState s;
      s.format_version = version;
      decode_common(in, s);
      s.fingerprint = decode_fingerprint(in.getFingerprint(), file);
      s.epoch_length = in.getEpochLength();
      actors::validate(s);
      out.sampler = std::move(s);
    }
  } catch (const actors::SamplerStateError& e) {
    fail(CheckpointErrorKind::corrupt, file, e.what());
  }
  return out;
}

// ---- file names

// What a file name says. Legacy names (rank-R-of-W.ckpt) say only rank and world size.
struct FileName {
  std::uint64_t generation = 0;
  std::uint64_t job = 0;
  std::uint64_t run = 0;
  std::uint32_t rank = 0;
  std::uint32_t world = 0;
  bool legacy = false;
  bool temp = false;
};

std::string legacy_file_name(std::uint32_t rank, std::uint32_t world_size) {
  return "rank-" + std::to_string(rank) + "-of-" + std::to_string(world_size) + ".ckpt";
}

std::optional<FileName> parse_final_name(const std::string& name) {
  FileName out;
  unsigned long long gen = 0, job = 0, run = 0;
  unsigned rank = 0, world = 0;
  if (std::sscanf(name.c_str(), "gen-%llu.job-%16llx.run-%16llx.rank-%u-of-%u.ckpt", &gen, &job,
                  &run, &rank, &world) == 5) {
    out = {gen, job, run, rank, world, false, false};
    if (name != checkpoint_file_name(gen, {.job = job, .run = run}, rank, world))
      return std::nullopt;
  } else if (std::sscanf(name.c_str(), "rank-%u-of-%u.ckpt", &rank, &world) == 2) {
    out = {0, 0, 0, rank, world, true, false};
    if (name != legacy_file_name(rank, world)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  if (out.world == 0 || out.rank >= out.world) return std::nullopt;
  return out;
}

// A checkpoint file or a temporary one (".<name>.tmp-<pid>").
std::optional<FileName> parse_name(const std::string& name) {
  if (name.empty() || name[0] != '.') return parse_final_name(name);
  const auto tmp = name.rfind(".tmp-");
  if (tmp == std::string::npos || tmp < 2) return std::nullopt;
  auto inner = parse_final_name(name.substr(1, tmp - 1));
  if (inner) inner->temp = true;
  return inner;
}

std::string probe_prefix(std::uint32_t rank, std::uint32_t world) {
  return ".probe-rank-" + std::to_string(rank) + "-of-" + std::to_string(world) + ".tmp-";
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

// ---- directories and sets

struct Entry {
  fs::path path;
  FileName name;
};

// The checkpoint and temporary files of DIR; a legacy checkpoint file's generation is
// read from it. Throws `unlisted` when DIR cannot be listed.
std::vector<Entry> list_dir(const fs::path& dir, CheckpointErrorKind unlisted) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) fail(unlisted, dir, "cannot list the directory: " + ec.message());
  std::vector<Entry> out;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    auto name = parse_name(it->path().filename().string());
    if (!name) continue;
    if (name->legacy && !name->temp) {
      const auto decoded = decode_checkpoint_file(read_file(it->path()), it->path());
      name->generation = decoded.generation();
    }
    out.push_back({it->path(), *name});
  }
  if (ec) fail(unlisted, dir, "cannot list the directory: " + ec.message());
  return out;
}

using SetKey = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>;  // gen, run, world
using Sets = std::map<SetKey, std::map<std::uint32_t, const Entry*>, std::greater<>>;

// The checkpoint files of job `job` by set, newest generation first.
Sets group_sets(const std::vector<Entry>& entries, std::uint64_t job) {
  Sets sets;
  for (const auto& e : entries) {
    if (e.name.temp || e.name.job != job) continue;
    auto& set = sets[{e.name.generation, e.name.run, e.name.world}];
    if (set.count(e.name.rank)) {
      fail(CheckpointErrorKind::mismatched, e.path,
           "a second file for rank " + std::to_string(e.name.rank) + " of generation " +
               std::to_string(e.name.generation) + " (also " +
               set[e.name.rank]->path.filename().string() + ")");
    }
    set[e.name.rank] = &e;
  }
  return sets;
}

bool complete(const Sets::value_type& set) { return set.second.size() == std::get<2>(set.first); }

std::string hex16(std::uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, x);
  return buf;
}

// ---- writing

std::filesystem::path write_bytes(const fs::path& dir, const std::string& name,
                                  const std::vector<std::byte>& bytes, bool sync) {
  const fs::path target = dir / name;
  try {
    publish_file(target, bytes, {.mode = 0644, .sync = sync});
  } catch (const FileError& e) {
    fail(CheckpointErrorKind::io, e.path(), e.operation() + ": " + e.code().message());
  }
  return target;
}

// GENERATIONS AND SETS: removes the files older than the keep-th newest complete set
// of the writer's job: this rank's share of them, or all of them when this write
// completed its set (the last rank to save cleans up after the others).
void prune(const fs::path& dir, const fs::path& written, const RunId& run, std::uint64_t generation,
           std::uint32_t rank, std::uint32_t world, std::uint32_t keep) {
  if (keep == 0) return;
  std::vector<Entry> entries;
  try {
    entries = list_dir(dir, CheckpointErrorKind::io);
  } catch (const CheckpointError& e) {
    fail(CheckpointErrorKind::io, dir,
         "wrote " + written.filename().string() + " but could not prune: " + e.reason());
  }
  const Sets sets = group_sets(entries, run.job);
  std::uint32_t seen = 0;
  std::optional<std::uint64_t> threshold;
  for (const auto& set : sets) {
    if (complete(set) && ++seen == keep) {
      threshold = std::get<0>(set.first);
      break;
    }
  }
  if (!threshold) return;
  const auto mine = sets.find({generation, run.run, world});
  const bool completed = mine != sets.end() && complete(*mine);
  for (const auto& e : entries) {
    if (e.name.job != run.job || e.name.generation >= *threshold) continue;
    if (e.name.legacy && e.name.temp) continue;  // a legacy temporary file's generation is unknown
    if (!completed && e.name.rank % world != rank) continue;
    if (::unlink(e.path.c_str()) != 0 && errno != ENOENT) {
      fail_errno(e.path, "wrote " + written.filename().string() + " but cannot prune");
    }
  }
}

template <class State>
std::filesystem::path write_state(const fs::path& dir, const State& state,
                                  const WriteOptions& options) {
  const auto name =
      checkpoint_file_name(state.generation, options.run, state.rank, state.world_size);
  const auto path = write_bytes(dir, name, encode(state, options.run), options.sync);
  prune(dir, path, options.run, state.generation, state.rank, state.world_size, options.keep);
  return path;
}

// ---- loading

// The newest complete set of DIR's one job, decoded and checked against its names.
struct ChosenSet {
  SetKey key{};
  std::uint64_t job = 0;
  std::vector<fs::path> files{};
  std::vector<DecodedCheckpoint> decoded{};
};

ChosenSet newest_complete_set(const fs::path& dir, bool want_mix) {
  const std::vector<Entry> entries = list_dir(dir, CheckpointErrorKind::not_found);
  std::map<std::uint64_t, const Entry*> jobs;
  for (const auto& e : entries) {
    if (!e.name.temp) jobs.emplace(e.name.job, &e);
  }
  if (jobs.empty())
    fail(CheckpointErrorKind::not_found, dir,
         "no checkpoint files (gen-….ckpt or rank-R-of-W.ckpt)");
  if (jobs.size() > 1) {
    std::string which;
    for (const auto& [job, e] : jobs) {
      which += (which.empty() ? "" : ", ") +
               ("job " + hex16(job) + " (" + e->path.filename().string() + ")");
    }
    fail(CheckpointErrorKind::conflict, dir,
         "holds the checkpoints of " + std::to_string(jobs.size()) + " jobs: " + which +
             "; a directory holds one job's sets, so it is not clear which to resume: move "
             "the other job's files away");
  }
  ChosenSet out;
  out.job = jobs.begin()->first;
  const Sets sets = group_sets(entries, out.job);
  const auto newest = std::find_if(sets.begin(), sets.end(), complete);
  if (newest == sets.end()) {
    const auto& [key, ranks] = *sets.begin();
    const auto [gen, run, world] = key;
    std::string missing;
    for (std::uint32_t r = 0; r < world; ++r) {
      if (ranks.count(r)) continue;
      missing += (missing.empty() ? "" : ", ") +
                 checkpoint_file_name(gen, {.job = out.job, .run = run}, r, world) + " (missing)";
    }
    fail(CheckpointErrorKind::incomplete, dir,
         "no complete checkpoint set; the newest, generation " + std::to_string(gen) +
             " of world size " + std::to_string(world) + ", lacks " + missing);
  }
  const auto tie = std::find_if(std::next(newest), sets.end(), complete);
  if (tie != sets.end() && std::get<0>(tie->first) == std::get<0>(newest->first)) {
    fail(CheckpointErrorKind::mismatched, dir,
         "two complete sets of generation " + std::to_string(std::get<0>(newest->first)) +
             " (world sizes " + std::to_string(std::get<2>(newest->first)) + " and " +
             std::to_string(std::get<2>(tie->first)) + ", runs " +
             hex16(std::get<1>(newest->first)) + " and " + hex16(std::get<1>(tie->first)) + ")");
  }
  out.key = newest->first;
  for (const auto& [rank, e] : newest->second) {
    auto d = decode_checkpoint_file(read_file(e->path), e->path);
    auto says = [&](const std::string& what) {
      fail(CheckpointErrorKind::mismatched, e->path, "its name says " + what);
    };
    if (d.rank() != e->name.rank || d.world_size() != e->name.world) {
      says("rank " + std::to_string(e->name.rank) + " of " + std::to_string(e->name.world) +
           " but it holds the state of rank " + std::to_string(d.rank()) + " of " +
           std::to_string(d.world_size()));
    }
    if (d.generation() != e->name.generation || d.job != e->name.job || d.run != e->name.run) {
      says("generation " + std::to_string(e->name.generation) + " of job " + hex16(e->name.job) +
           ", run " + hex16(e->name.run) + " but it holds generation " +
           std::to_string(d.generation()) + " of job " + hex16(d.job) + ", run " + hex16(d.run));
    }
    if (d.mix.has_value() != want_mix) {
      fail(CheckpointErrorKind::conflict, e->path,
           want_mix ? "holds a sampler's state, not a weighted mix's"
                    : "holds a weighted mix's state (load it with load_mix_checkpoint)");
    }
    out.files.push_back(e->path);
    out.decoded.push_back(std::move(d));
  }
  return out;
}

void check_rank(std::uint32_t rank, std::uint32_t world_size, const char* what) {
  if (world_size == 0 || rank >= world_size) {
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(rank) +
                                " is not below world size " + std::to_string(world_size));
  }
}

template <class Loaded, class State>
Loaded load_set(const fs::path& dir, std::uint32_t rank, std::uint32_t world_size,
                const auto& expected, std::optional<State> DecodedCheckpoint::*member) {
  constexpr bool is_mix = std::is_same_v<State, MixState>;
  const ChosenSet set = newest_complete_set(dir, is_mix);
  std::vector<State> states;
  for (const auto& d : set.decoded) states.push_back(*(d.*member));
  for (std::size_t i = 1; i < states.size(); ++i) {
    if (auto c = actors::describe_conflict(states.front().fingerprint, states[i].fingerprint);
        !c.empty()) {
      fail(CheckpointErrorKind::mismatched, set.files[i],
           "the fingerprint (" + c + ") differs from " + set.files.front().filename().string());
    }
  }
  if (expected) {
    if (auto c = actors::describe_conflict(states.front().fingerprint, *expected); !c.empty())
      fail(CheckpointErrorKind::conflict, set.files.front(), c);
  }
  Loaded out;
  out.generation = std::get<0>(set.key);
  out.saved_world_size = std::get<2>(set.key);
  out.files = set.files;
  out.job = set.job;
  out.run = std::get<1>(set.key);
  if (world_size == out.saved_world_size) {  // exact resume: the rank's own state
    out.state = states[rank];
    return out;
  }
  try {
    out.state = actors::repartition(std::span<const State>(states), rank, world_size);
  } catch (const actors::SamplerStateError& e) {
    const bool never = is_mix && std::string(e.what()).find("'never'") != std::string::npos;
    fail(never ? CheckpointErrorKind::conflict : CheckpointErrorKind::mismatched, dir, e.what());
  }
  return out;
}

std::uint64_t id_of(std::vector<std::string> parts) {
  const std::uint64_t h = actors::hash_sample_identities(parts);
  return h == 0 ? 1 : h;  // 0 is the legacy (or unidentified) job
}

std::string fingerprint_text(const actors::DatasetFingerprint& f) {
  return std::to_string(f.n) + "/" + std::to_string(f.identity_hash) + "/" +
         std::to_string(static_cast<int>(f.kind)) + "/" + std::to_string(f.seed) + "/" +
         std::to_string(f.num_draws) + "/" + std::to_string(f.weights_hash) + "/" +
         std::to_string(static_cast<int>(f.tail));
}

RunId fresh_run_of(std::string sampling, std::uint32_t world_size, std::string_view launch) {
  const std::uint64_t id = id_of({"brigade fresh run 1", std::move(sampling),
                                  std::to_string(world_size), std::string(launch)});
  return {.job = id, .run = id, .first_generation = 1, .resumed = false};
}

RunId resumed_run_of(std::uint64_t job, std::uint64_t run, std::uint64_t generation,
                     std::uint32_t world_size, std::string_view launch) {
  const std::uint64_t id =
      id_of({"brigade resumed run 1", std::to_string(job), std::to_string(run),
             std::to_string(generation), std::to_string(world_size), std::string(launch)});
  return {.job = job, .run = id, .first_generation = generation + 1, .resumed = true};
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

std::string checkpoint_file_name(std::uint64_t generation, const RunId& run, std::uint32_t rank,
                                 std::uint32_t world_size) {
  return "gen-" + std::to_string(generation) + ".job-" + hex16(run.job) + ".run-" + hex16(run.run) +
         "." + legacy_file_name(rank, world_size);
}

std::uint64_t DecodedCheckpoint::generation() const {
  return sampler ? sampler->generation : mix->generation;
}
std::uint32_t DecodedCheckpoint::rank() const { return sampler ? sampler->rank : mix->rank; }
std::uint32_t DecodedCheckpoint::world_size() const {
  return sampler ? sampler->world_size : mix->world_size;
}

std::vector<std::byte> encode_checkpoint(const SamplerState& state, const RunId& run) {
  return encode(state, run);
}

std::vector<std::byte> encode_checkpoint(const MixState& state, const RunId& run) {
  return encode(state, run);
}

DecodedCheckpoint decode_checkpoint_file(std::span<const std::byte> bytes,
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
    return decode_rank_state(inner.getRoot<schema::RankState>(), file);
  } catch (const kj::Exception& e) {
    fail(CheckpointErrorKind::corrupt, file,
         std::string("not a valid message: ") + e.getDescription().cStr());
  }
}

SamplerState decode_checkpoint(std::span<const std::byte> bytes,
                               const std::filesystem::path& file) {
  auto decoded = decode_checkpoint_file(bytes, file);
  if (!decoded.sampler)
    fail(CheckpointErrorKind::corrupt, file, "holds a weighted mix's state, not a sampler's");
  return std::move(*decoded.sampler);
}

std::filesystem::path write_checkpoint(const std::filesystem::path& dir, const SamplerState& state,
                                       const WriteOptions& options) {
  return write_state(dir, state, options);
}

std::filesystem::path write_checkpoint(const std::filesystem::path& dir, const MixState& state,
                                       const WriteOptions& options) {
  return write_state(dir, state, options);
}

LoadedCheckpoint load_checkpoint(const std::filesystem::path& dir, std::uint32_t rank,
                                 std::uint32_t world_size, const LoadOptions& options) {
  check_rank(rank, world_size, "load_checkpoint");
  return load_set<LoadedCheckpoint, SamplerState>(dir, rank, world_size, options.expected,
                                                  &DecodedCheckpoint::sampler);
}

LoadedMixCheckpoint load_mix_checkpoint(const std::filesystem::path& dir, std::uint32_t rank,
                                        std::uint32_t world_size, const MixLoadOptions& options) {
  check_rank(rank, world_size, "load_mix_checkpoint");
  return load_set<LoadedMixCheckpoint, MixState>(dir, rank, world_size, options.expected,
                                                 &DecodedCheckpoint::mix);
}

RunId fresh_run(const actors::DatasetFingerprint& sampling, std::uint32_t world_size,
                std::string_view launch) {
  return fresh_run_of("sampler " + fingerprint_text(sampling), world_size, launch);
}

RunId fresh_run(const actors::MixFingerprint& sampling, std::uint32_t world_size,
                std::string_view launch) {
  std::string text = "mix " + std::to_string(sampling.seed) + "/" +
                     std::to_string(static_cast<int>(sampling.stop)) + "/" +
                     std::to_string(sampling.count);
  for (const auto& s : sampling.sources) text += " " + fingerprint_text(s);
  for (double w : sampling.weights) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %a", w);  // exact
    text += buf;
  }
  return fresh_run_of(std::move(text), world_size, launch);
}

RunId resumed_run(const LoadedCheckpoint& from, std::uint32_t world_size, std::string_view launch) {
  return resumed_run_of(from.job, from.run, from.generation, world_size, launch);
}

RunId resumed_run(const LoadedMixCheckpoint& from, std::uint32_t world_size,
                  std::string_view launch) {
  return resumed_run_of(from.job, from.run, from.generation, world_size, launch);
}

void check_checkpoint_dir(const std::filesystem::path& dir, const RunId& run, std::uint32_t rank,
                          std::uint32_t world_size) {
  check_rank(rank, world_size, "check_checkpoint_dir");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(CheckpointErrorKind::io, dir, "cannot create the directory: " + ec.message());
  if (!fs::is_directory(dir, ec)) fail(CheckpointErrorKind::io, dir, "not a directory");
  {
    const fs::path probe = dir / (probe_prefix(rank, world_size) + std::to_string(::getpid()));
    FileDescriptor fd(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd.get() < 0) fail_errno(dir, "cannot write in the checkpoint directory");
    TempFile remove(probe);
    const char byte = 0;
    if (::write(fd.get(), &byte, 1) != 1)
      fail_errno(dir, "cannot write in the checkpoint directory");
  }
  const std::vector<Entry> entries = list_dir(dir, CheckpointErrorKind::io);
  // This rank's stale temporary files: nobody else writes them.
  for (const auto& e : entries) {
    if (e.name.temp && e.name.rank == rank && e.name.world == world_size) ::unlink(e.path.c_str());
  }
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    if (item.path().filename().string().rfind(probe_prefix(rank, world_size), 0) == 0)
      ::unlink(item.path().c_str());
  }
  const auto refuse = [&](const Entry& e, const std::string& what) {
    fail(CheckpointErrorKind::conflict, dir,
         "holds " + what + " (" + e.path.filename().string() + ")");
  };
  for (const auto& e : entries) {
    if (e.name.temp) continue;
    if (e.name.job != run.job) {
      if (!run.resumed) {
        refuse(e, "checkpoint files of another job; resume that job with --resume-from " +
                      dir.string() + ", or use an empty directory for a fresh run");
      }
      refuse(e,
             "checkpoint files of another job; write this job's checkpoints into the "
             "directory it resumed from or an empty one");
    }
    if (!run.resumed &&
        (e.name.run != run.run || (e.name.rank == rank && e.name.world == world_size))) {
      refuse(e, "checkpoint files of an earlier run of this job; resume it with --resume-from " +
                    dir.string() + ", or use an empty directory for a fresh run");
    }
  }
  if (!run.resumed) return;
  for (const auto& set : group_sets(entries, run.job)) {
    const auto [gen, other, world] = set.first;
    if (complete(set) && other != run.run && gen >= run.first_generation) {
      fail(CheckpointErrorKind::conflict, dir,
           "holds a complete set of generation " + std::to_string(gen) +
               " of this job written by another run (" +
               set.second.begin()->second->path.filename().string() +
               "), newer than the set this run resumed from: a later resume would take it "
               "instead of this run's checkpoints; resume from it, or use an empty directory");
    }
  }
}

}  // namespace brigade::transport
