// libFuzzer harness: a sweep file through load_sweep_file, the defaults and checks of finish_sweep_spec,
// the grid's points and their names, and sweep.json.
#include <set>
#include <string>

#include "fuzz_support.h"
#include "sweep/sweep_spec.h"

using namespace causal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("sweep.json", data, size);
  try {
    SweepSpec spec = load_sweep_file(path);
    finish_sweep_spec(spec, "base");
    // A grid is a product: its size is the user's choice, not a parser's, so only small ones are expanded.
    size_t count = 1;
    for (const GridAxis& axis : spec.grid) count = std::min<size_t>(count * axis.values.size(), 1 << 16);
    if (count > 4096) return 0;
    const std::vector<SweepPoint> points = grid_points(spec);
    fuzz::require(points.size() == count, "one point per grid combination");
    std::set<std::string> names;
    for (const SweepPoint& p : points) {
      fuzz::require(!p.name.empty() && p.name.find('/') == std::string::npos,
                    "a point's name is a folder name");
      names.insert(p.name);
      p.overrides();
    }
    fuzz::require(names.size() == points.size(), "point names are distinct");
    sweep_to_json(spec, points).dump();
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  return 0;
}
