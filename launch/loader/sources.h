#pragma once

// Where a job's samples come from: the listings that build its Dataset
// (launch/loader/dataset.h) from what the config names (`data`, `list`), and
// open_dataset(), the one place that picks a listing for a config (`brigade run`, a
// worker serving its own dataset and the Python Loader all call it).

#include <string>
#include <vector>

#include "launch/loader/dataset.h"
#include "launch/loader/job_config.h"

namespace brigade::launch {

/// The extensions a folder listing takes for `kind`, lower case, with the dot. Images:
/// torchvision's IMG_EXTENSIONS (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp);
/// videos: .mp4 .mkv .webm .avi .mov. A file is taken when its name, lower-cased
/// (ASCII), ends with one of them, as ImageFolder's has_file_allowed_extension.
const std::vector<std::string>& folder_extensions(MediaKind kind);

// FOLDER LISTINGS. Both walk `dir` recursively, following symbolic links to folders
// and files as os.walk(followlinks=True) does; a link that leads back into a folder
// being walked (a loop, which ImageFolder would walk 40 levels deep, up to the kernel's
// limit on links in one path) is a ConfigError naming the link. Hidden files and
// folders are listed like any other (ImageFolder does). An entry that cannot be
// inspected (a dangling link, a link loop on a file) is listed as a file when its name
// has a media extension, and fails as a sample with its cause (see read_sample), as a
// FIFO or device with a media extension does; a folder that cannot be read is a
// ConfigError (ImageFolder skips it without a word). Identities are paths relative to
// `dir` ("cat/sub/0001.jpg").

/// Every file under `dir` with an extension of `kind`, sorted by the bytes of its
/// relative path (so "cat-big/x.jpg" comes before "cat/x.jpg": '-' < '/'). Unlabelled.
/// Throws ConfigError if `dir` cannot be read, holds a loop, or holds no such file.
Dataset list_folder(const std::string& dir, MediaKind kind);
/// torchvision.datasets.ImageFolder's listing (find_classes + make_dataset): the
/// classes are `dir`'s immediate subfolders (links to folders included) sorted by name,
/// a sample's label is its class's index, and the samples come class by class, each
/// class's folders in the order of their paths (sorted as strings, a folder's files
/// before its subfolders' when the names sort so), each folder's files sorted by name:
/// the same ids, paths and labels as ImageFolder(dir).samples. Files directly in `dir`
/// belong to no class: they are not listed (as ImageFolder) and a warning counts them.
/// Names are compared as bytes: Python's code-point order for UTF-8 names (names that
/// are not valid UTF-8 may sort otherwise). Throws ConfigError if `dir` has no
/// subfolder, a class has no file of `kind` (ImageFolder's FileNotFoundError), a
/// folder cannot be read or holds a loop.
Dataset list_class_folders(const std::string& dir, MediaKind kind);
/// The non-blank lines of `list_file`; relative paths resolve against its folder.
/// Throws ConfigError if it cannot be read or has no entry.
Dataset read_list(const std::string& list_file);

/// The dataset `config` names: with `sources`, each source's dataset (as below, from
/// source_config()) joined in their order (Dataset::join; an error names the source's
/// index and name); else its `shards` (launch/loader/shards.h), else its
/// `manifest`, else its `list`, else its `data` folder, else (with `demo_allowed`) the
/// demo dataset of its kind (generated on first use: demo_folder()); a folder is listed
/// by list_class_folders with `labels` folder, else list_folder.
/// Throws ConfigError naming the key (no data without `demo_allowed`, `labels` folder
/// with a list, a listing's error).
Dataset open_dataset(const RunConfig& config, bool demo_allowed = true);

}  // namespace brigade::launch
