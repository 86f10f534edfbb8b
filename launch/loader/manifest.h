#pragma once

// Manifests: a table of samples in a file, one row per sample, read into the job's
// Dataset (launch/loader/dataset.h). Chosen by open_dataset (launch/loader/sources.h)
// for a config's `manifest`.
//
// FORMATS. CSV (RFC 4180 as libcsv reads it: quoted fields with embedded commas,
// quotes and newlines; a UTF-8 byte order mark and CRLF line ends are accepted) whose
// first record names the columns; TSV the same with tabs; JSON Lines: one JSON object
// per line, its keys the columns. The format comes from the extension (.csv, .tsv,
// .jsonl, .ndjson) unless ManifestOptions::format says. Blank lines are skipped in
// every format; a sample's id is its index among the rows.
//
// COLUMNS. `path_column` (default "path"): the sample's file, relative to the
// manifest's folder or absolute (the identity is the text as written, so "a.jpg" and
// "./a.jpg" are different samples). The label column: `label_column` when given (then
// every row must have it), else "label" if the header (CSV, TSV) or the first object
// (JSON Lines) has one, else the dataset is unlabelled. Metadata: the columns named in
// `meta`, in that order (Dataset::meta_columns), each row's text (a JSON string's
// value, null as "", any other JSON value as minified JSON text: 0.5, [1,2]).
//
// LABELS. Without `classes_file`, a label column holds integers (≥ 0; the labels as
// they are, Dataset::classes() empty) or class names (any other text; the classes are
// the sorted set of names, label = index in it, as ImageFolder does with folders); a
// column mixing both is an error (give `classes_file`). With `classes_file` (one class
// name per line, label = line index; blank lines and duplicates are errors), a value
// that names a class is its index, an integer value is taken as the index itself and
// must be < the number of classes. In JSON Lines a label is a string or an integer.
//
// ERRORS. Every bad input throws ConfigError (key "manifest", or the option's key)
// naming the file and the line: a file that cannot be read, an unknown format, a
// missing column (header or row), a row with more fields than the header, malformed
// quoting or JSON, a label that is neither an integer ≥ 0 nor a name (or an unknown
// class, one out of range with `classes_file`), an empty path, a duplicate path (an
// error: two rows of one sample would make it twice as likely, silently), no rows.
//
// COST. The file is mapped and parsed line by line; the Dataset holds 8 bytes per
// sample (16 labelled, +8 per metadata column) beside the strings. Duplicates are
// found with an 8-byte hash per sample, freed after the load.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launch/loader/dataset.h"

namespace brigade::launch {

enum class ManifestFormat { csv, tsv, jsonl };

struct ManifestOptions {
  std::optional<ManifestFormat> format{};  // unset: by the file's extension
  std::string path_column = "path";
  std::optional<std::string> label_column{};  // unset: "label" when present
  std::string classes_file{};                 // "": labels are integers or sorted names
  std::vector<std::string> meta{};            // metadata columns to keep
};

struct RunConfig;
/// The manifest options `config` gives (its manifest_format, path_column, label_column,
/// classes and meta).
ManifestOptions manifest_options(const RunConfig& config);

/// "csv", "tsv" or "jsonl" (also "ndjson"); nullopt for anything else.
std::optional<ManifestFormat> manifest_format(std::string_view name);
/// The format of `file` by its extension (.csv, .tsv, .jsonl, .ndjson; any case).
std::optional<ManifestFormat> manifest_format_of(std::string_view file);

/// The manifest `file` as a Dataset rooted at the file's folder. Throws ConfigError
/// (see ERRORS).
Dataset read_manifest(const std::string& file, const ManifestOptions& options);
/// The manifest whose bytes are `text`, named `name` in errors, rooted at `root`;
/// `options.format` must be set. `classes` replaces reading options.classes_file (its
/// names, in order) when given. Throws ConfigError as read_manifest.
Dataset parse_manifest(std::string_view text, const std::string& name, std::string root,
                       const ManifestOptions& options,
                       const std::optional<std::vector<std::string>>& classes = std::nullopt);

}  // namespace brigade::launch
