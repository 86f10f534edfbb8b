# Checkpoint files of the samplers and mixes: one file per rank and save (file names:
# transport/checkpoint/checkpoint.h).
#
# STABILITY. This schema is a stable on-disk format. Fields may be added at the end
# of a struct (with a new ordinal); existing ordinals, types and enum values never
# change. A change in meaning bumps RankState.formatVersion (see SamplerState in
# actors/sampler.h), which readers check.
#
# VERSIONS. formatVersion 1: @0-@9 of RankState. formatVersion 2 adds jobId, runId,
# planned and mix (@10-@13); a reader of version 1 refuses version 2 files, whose
# planned epochs and mix states it would misread. Readers of version 2 read version 1
# files as version 2 files without those fields. The envelope (fileVersion 1) is
# unchanged.
#
# LAYOUT. A file is one unpacked Cap'n Proto message (standard segment table framing)
# whose root is CheckpointFile. Its `payload` holds a second message (root RankState),
# and `crc32` is the CRC-32 (zlib polynomial) of those payload bytes: Cap'n Proto
# itself accepts a flipped byte inside a field, the checksum does not.

@0xf24178d7ae8fe23d;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::transport::schema");

struct CheckpointFile {
  magic @0 :UInt64;      # 0x54504b4347495242 ("BRIGCKPT" little-endian)
  crc32 @1 :UInt32;      # of payload
  payload @2 :Data;      # a message whose root is RankState
  fileVersion @3 :UInt32;  # of this envelope: 1 (also fills the data word, so that
                           # no byte of the file is unchecked padding)
}

enum TailPolicy {
  none @0;
  dropLast @1;
  pad @2;
}

enum SamplerKind {
  deterministic @0;
  random @1;
  weighted @2;
  blocks @3;        # actors::DistributedBlockSampler (tar shards read a window at a time)
}

struct DatasetFingerprint {
  n @0 :UInt64;
  identityHash @1 :UInt64;
  kind @2 :SamplerKind;
  seed @3 :UInt64;
  numDraws @4 :UInt64;
  weightsHash @5 :UInt64;
  tail @6 :TailPolicy;
}

# Global epoch positions start, start + stride, … (count of them).
struct PositionRun {
  start @0 :UInt64;
  stride @1 :UInt64;
  count @2 :UInt64;
}

struct RankState {
  formatVersion @0 :UInt32;
  generation @1 :UInt64;
  fingerprint @2 :DatasetFingerprint;
  epoch @3 :UInt64;
  epochLength @4 :UInt64;
  worldSize @5 :UInt32;
  rank @6 :UInt32;
  owned @7 :List(PositionRun);       # this rank's positions, in its local order
  committedWatermark @8 :UInt64;     # local positions below it are committed
  committedAbove @9 :List(UInt64);   # and these (sorted, above the watermark)
  jobId @10 :UInt64;                 # the job the file belongs to (0 in version 1 files)
  runId @11 :UInt64;                 # the run of that job that wrote it
  planned @12 :List(PlannedEpoch);   # the rank's shares of epochs epoch+1, epoch+2, …
  mix @13 :MixState;                 # set for a weighted mix's state: then `fingerprint`
                                     # and `epochLength` are unused, and `owned` holds
                                     # mix positions unless mix.ownSequence
}

# A rank's share of an epoch it has not started (actors/sampler.h STRADDLING SETS).
struct PlannedEpoch {
  epochLength @0 :UInt64;     # samplers
  epochWorldSize @1 :UInt32;  # mixes
  owned @2 :List(PositionRun);
}

enum MixStop {
  firstExhausted @0;
  afterCount @1;
  never @2;
  totalCount @3;
}

# What actors::MixState adds to the fields of RankState.
struct MixState {
  sources @0 :List(DatasetFingerprint);
  weights @1 :List(Float64);
  seed @2 :UInt64;
  stop @3 :MixStop;
  count @4 :UInt64;
  epochWorldSize @5 :UInt32;
  ownSequence @6 :Bool;
}
