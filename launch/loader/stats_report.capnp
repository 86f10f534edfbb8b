@0xaba799c7948d0bb1;

# One rank's statistics report for one interval (launch/loader/cluster_stats.h
# RankReport, written by launch/loader/stats_report.h, the one codec). The loader's own
# schema, carried to rank 0 by the cluster's links; stable within one version.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::launch::wire");

struct StageFigures {  # actors/stats.h StageStats
  name @0 :Text;
  kind @1 :Text;
  concurrency @2 :Int32;
  capacity @3 :Int32;
  tasks @4 :UInt64;
  failures @5 :UInt64;
  filtered @6 :UInt64;
  retries @7 :UInt64;
  outputs @8 :UInt64;
  meanMs @9 :Float64;
  p50Ms @10 :Float64;
  p90Ms @11 :Float64;
  p99Ms @12 :Float64;
  starvedS @13 :Float64;
  backpressuredS @14 :Float64;
  occupancy @15 :Float64;
  itemsPerS @16 :Float64;
  elapsedS @17 :Float64;
}

struct WorkerFigures {  # launch/loader/cluster_stats.h WorkerReport
  name @0 :Text;
  samples @1 :UInt64;
  busyS @2 :Float64;
  waitedS @3 :Float64;
  tasks @4 :UInt64;
}

struct StatsReport {
  rank @0 :UInt32;
  host @1 :Text;
  sequence @2 :UInt64;
  intervalS @3 :Float64;
  atS @4 :Float64;
  samples @5 :UInt64;
  samplesTotal @6 :UInt64;
  batches @7 :UInt64;
  exposedWaitS @8 :Float64;
  exposedWaitTotalS @9 :Float64;
  readiness @10 :Float64;
  sinceLastRequestS @11 :Float64;
  pipelineFull @12 :Bool;
  lastSampleId @13 :UInt64;
  stages @14 :List(StageFigures);
  stageTotals @15 :List(StageFigures);
  workers @16 :List(WorkerFigures);
  epochRestarted @17 :Bool;
  intervalIndex @18 :UInt64;  # the grid interval it ends (0: none)
}

struct TrainerServed {  # launch/loader/cluster_stats.h TrainerServed (rank from the name)
  name @0 :Text;
  tasks @1 :UInt64;
  busyS @2 :Float64;
}

# A worker node's own report for one interval (cluster_stats.h WorkerNodeReport), sent
# on the same link by `brigade worker --stats` (transport/remote/report_link.h: the
# sender id kWorkerSender).
struct WorkerNodeStats {
  name @0 :Text;
  host @1 :Text;
  incarnation @2 :UInt64;
  sequence @3 :UInt64;
  intervalS @4 :Float64;
  atS @5 :Float64;
  threads @6 :UInt32;
  tasks @7 :UInt64;
  failed @8 :UInt64;
  busyS @9 :Float64;
  taskP50Ms @10 :Float64;
  taskP99Ms @11 :Float64;
  queued @12 :UInt64;
  running @13 :UInt64;
  cpuS @14 :Float64;
  trainers @15 :List(TrainerServed);
  intervalIndex @16 :UInt64;  # the grid interval it ends (0: none)
}
