// Run configuration: the top-level fields and the model, data and train sections (one header each, so a
// layer that needs one section does not see the others).
// visit_fields() is the single list of fields that JSON in/out, --set overrides and docs walk.
#pragma once

#include <cstdint>
#include <string>

#include "config/data_config.h"
#include "config/dist_config.h"
#include "config/model_config.h"
#include "config/train_config.h"

namespace causal {

struct RunConfig {
  std::string name = "run";    // run folder name under runs/
  int64_t seed = 0;            // seeds every generator of the run (init, batches, dropout)
  std::string device = "cpu";  // torch device string: "cpu", "cuda", "cuda:1"
  int64_t threads = 0;         // intra-op CPU threads; 0 = all cores
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  DistConfig dist;  // data-parallel training (used only when ranks are launched)

  template <class V>
  void visit_fields(V& v) {
    v.field("name", name);
    v.field("seed", seed);
    v.field("device", device);
    v.field("threads", threads);
    v.field("model", model);
    v.field("data", data);
    v.field("train", train);
    v.field("dist", dist);
  }
};

}  // namespace causal
