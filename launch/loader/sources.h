#pragma once

// Where a job's samples come from: the listings that build its Dataset
// (launch/loader/dataset.h) from what the config names (`data`, `list`), and
// open_dataset(), the one place that picks a listing for a config (`brigade run`, a
// worker serving its own dataset and the Python Loader all call it).

#include <string>

#include "launch/loader/dataset.h"
#include "launch/loader/job_config.h"

namespace brigade::launch {

/// Files under `dir` (recursively) with an extension of `kind`, sorted by path.
/// Symbolic links are listed whatever they point to — a dangling link, a loop or a
/// link to a directory then fails as a sample with its cause (see read_sample), as a
/// FIFO or device with a media extension does; nothing is skipped silently.
/// Throws ConfigError if `dir` cannot be read or holds no such file.
Dataset list_folder(const std::string& dir, MediaKind kind);
/// The non-blank lines of `list_file`; relative paths resolve against its folder.
/// Throws ConfigError if it cannot be read or has no entry.
Dataset read_list(const std::string& list_file);

/// The dataset `config` names: its `list`, else its `data` folder, else (with
/// `demo_allowed`) the demo dataset of its kind (generated on first use: demo_folder()).
/// Throws ConfigError naming the key (no data without `demo_allowed`, a listing's error).
Dataset open_dataset(const RunConfig& config, bool demo_allowed = true);

}  // namespace brigade::launch
