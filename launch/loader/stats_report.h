#pragma once

// A rank's statistics report (launch/loader/cluster_stats.h RankReport) as bytes, in the
// loader's own schema (launch/loader/stats_report.capnp): the one codec, for the link
// that carries reports to rank 0's directory.
//
// TRUST. read_stats_report() reads bytes a peer sent: it returns a value or throws
// transport::RemoteError saying why (a malformed message, a text longer than 256 bytes,
// more than 64 stages or 4,096 workers, a time that is negative or not finite) — never
// anything else, never a crash, whatever the bytes (tests/launch/loader/
// stats_report_test.cc feeds it mutations under AddressSanitizer). What it returns may
// still be refused by the analyzer (ClusterAnalyzer::add: a rank outside the world, a
// replayed sequence, figures an interval cannot hold). write_stats_report() writes any
// report: the reader judges.
//
// THREADING. Plain functions over values.

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "launch/loader/cluster_stats.h"

namespace brigade::launch {

std::vector<char> write_stats_report(const RankReport& report);
RankReport read_stats_report(std::span<const char> bytes);

/// A worker node's report (WorkerNodeReport), with the same TRUST: at most 4,096
/// trainers, texts of at most 256 bytes, times finite and not negative. A trainer's
/// rank is read from its name ("rank R of W …", the name a trainer's pool gives its
/// sessions), not carried.
std::vector<char> write_worker_report(const WorkerNodeReport& report);
WorkerNodeReport read_worker_report(std::span<const char> bytes);

/// The rank in a trainer's session name "rank R of W (pid P)"; none for another name.
std::optional<std::uint32_t> rank_of_trainer(std::string_view name);

}  // namespace brigade::launch
