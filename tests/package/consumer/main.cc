// A program built against an installed Brigade (tests/package): one use of each
// library — media decodes a synthetic JPEG and PNG (through the FFmpeg plugin, found in
// the package), actors runs a small pipeline, transport round-trips a sampler
// checkpoint, launch reads a TOML config. Prints "ok".

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "actors/pipeline.h"
#include "actors/sampler.h"
#include "launch/config.h"
#include "media/image.h"
#include "media/synthetic.h"
#include "transport/checkpoint/checkpoint.h"

using namespace brigade;

namespace {

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "consumer: %s failed\n", what);
  std::exit(1);
}

}  // namespace

int main() {
  const auto jpeg = media::make_image(media::ImageCodec::jpeg, 64, 48, 7);
  const auto image = media::load_image(media::Source::memory(jpeg, "synthetic.jpg"));
  check(image.shape() == std::vector<std::int64_t>{48, 64, 3}, "decoding a JPEG");
  // Through media's FFmpeg plugin, which the program finds in the package's lib folder.
  const auto png = media::make_image(media::ImageCodec::png, 64, 48, 7);
  const auto decoded = media::load_image(media::Source::memory(png, "synthetic.png"));
  check(decoded.shape() == std::vector<std::int64_t>{48, 64, 3}, "decoding a PNG");

  std::vector<int> input(100);
  std::iota(input.begin(), input.end(), 0);
  auto pipeline = actors::PipelineBuilder()
                      .add_source(input)
                      .pipe([](int x) { return 2 * x; }, {.concurrency = 2, .name = "double"})
                      .add_sink(2)
                      .build({.num_threads = 2, .log_stats_at_end = false});
  long sum = 0;
  for (auto& x : pipeline) sum += x;
  check(sum == 9900, "a pipeline");

  actors::DistributedDeterministicSampler sampler(10, {.rank = 1, .world_size = 2});
  const auto state = sampler.state({}, 3);
  const auto bytes = transport::encode_checkpoint(state);
  check(transport::decode_checkpoint(bytes, "memory") == state, "a checkpoint round trip");

  launch::RunConfig config;
  launch::apply_toml(config, "batch_size = 4\nseed = 3\n", "inline.toml");
  check(config.batch_size == 4 && config.seed == 3, "a TOML config");
  std::puts("ok");
}
