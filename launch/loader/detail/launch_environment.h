#pragma once

// The parts of resolve() (launch/loader/job_settings.h) that read the world outside the
// settings: the torchrun/Slurm launch environment, and a remote run's directory address,
// token and TLS files (LAUNCH ENVIRONMENT and REMOTE DECODE there).

#include <cstdint>
#include <optional>
#include <string_view>

#include "launch/loader/job_settings.h"

namespace brigade::launch::detail {

/// Rank, world size, local rank and size, launcher and master address: flags and the
/// file first, then torchrun's variables, then Slurm's, then the defaults.
void resolve_launch(RunConfig& config, const Getenv& getenv);
/// A remote run's "auto" directory, job token and TLS files; nothing without remote().
void resolve_remote(RunConfig& config, const Getenv& getenv);

/// The whole of `text` as a decimal integer, or nullopt.
std::optional<std::int64_t> parse_int(std::string_view text);

}  // namespace brigade::launch::detail
