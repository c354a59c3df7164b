// Dist section of the run config: how data-parallel ranks meet and exchange gradients (docs/distributed.md).
// visit_fields() is the single list of fields that JSON in/out, --set overrides and docs walk.
#pragma once

namespace causal {

struct DistConfig {
  double timeout_s = 60.0;  // rendezvous and each collective: a dead or missing rank fails the job after it
  double bucket_mb = 25.0;  // gradients are all-reduced in flat buckets of about this many MiB

  template <class V>
  void visit_fields(V& v) {
    v.field("timeout_s", timeout_s);
    v.field("bucket_mb", bucket_mb);
  }
};

}  // namespace causal
