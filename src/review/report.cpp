// The run report page (see report.h): header, training curves, retrieval controls, attention heatmaps.
#include "review/report.h"

#include <spdlog/fmt/fmt.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <tuple>

#include "config/config_io.h"
#include "io/atomic_file.h"
#include "io/run_files.h"
#include "review/attention_sample.h"
#include "review/html_page.h"
#include "review/report_evaluations.h"
#include "review/run_history.h"
#include "review/svg_chart.h"
#include "task/benchmark_eval.h"
#include "task/lab_checks.h"
#include "task/task_traits.h"

namespace causal {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using svg::xml_escape;

// ---- JSON helpers ---------------------------------------------------------------------------------

// `key` of a JSON object (results.json, a metrics row, state.json); nullptr when it is absent.
const json* find_key(const json& object, const std::string& key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// Whole numbers in full (rope theta 10000, not 10k); others compact.
std::string show(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e12)
    return std::to_string(static_cast<int64_t>(d));
  return svg::format_number(d);
}
std::string show(int64_t v) { return std::to_string(v); }
std::string show(bool v) { return v ? "true" : "false"; }

std::string show(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return show(v.get<int64_t>());
  if (v.is_number()) return show(v.get<double>());
  if (v.is_boolean()) return show(v.get<bool>());
  if (v.is_null()) return "null";
  return v.dump();
}

std::string show_at(const json& object, const std::string& key) {
  const json* v = find_key(object, key);
  return v ? show(*v) : "\u2014";
}

double number_at(const json& object, const std::string& key, double fallback = NAN) {
  const json* v = find_key(object, key);
  return v && v->is_number() ? v->get<double>() : fallback;
}

bool has_field(const std::vector<json>& rows, const std::string& field) {
  return std::any_of(rows.begin(), rows.end(), [&](const json& r) { return r.contains(field); });
}

// ---- HTML pieces ----------------------------------------------------------------------------------

std::string note(const std::string& text) { return "<p class=\"note\">" + xml_escape(text) + "</p>\n"; }

// A two-column table of (label, value) rows.
std::string kv_table(const std::string& title, const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string out = "<div class=\"box\"><h3>" + xml_escape(title) + "</h3><table>\n";
  for (const auto& [k, v] : rows) {
    out += "<tr><th>" + xml_escape(k) + "</th><td>" + xml_escape(v) + "</td></tr>\n";
  }
  return out + "</table></div>\n";
}

std::string chart_card(const svg::LineChart& chart, const std::string& caption) {
  std::string out = "<div class=\"card\">\n" + svg::render_line_chart(chart);
  if (!caption.empty()) out += "<p class=\"cap\">" + xml_escape(caption) + "</p>\n";
  return out + "</div>\n";
}

std::string note_card(const std::string& title, const std::string& text) {
  return "<div class=\"card\"><h3>" + xml_escape(title) + "</h3><p class=\"cap\">" + xml_escape(text) +
         "</p></div>\n";
}

svg::Series series(const std::string& name, const std::vector<std::pair<double, double>>& points,
                   const std::string& color = "", svg::SeriesStyle style = svg::SeriesStyle::kLine) {
  svg::Series s;
  s.name = name;
  s.color = color;
  s.style = style;
  for (const auto& [x, y] : points) {
    s.x.push_back(x);
    s.y.push_back(y);
  }
  return s;
}

// (step, value) of `field` in the rows whose boolean `flag` is true.
std::vector<std::pair<double, double>> flagged_points(const std::vector<json>& rows, const std::string& flag,
                                                      const std::string& field) {
  std::vector<json> picked;
  for (const json& r : rows) {
    const auto it = r.find(flag);
    if (it != r.end() && it->is_boolean() && it->get<bool>()) picked.push_back(r);
  }
  return field_points(picked, field);
}

// ---- the page's parts -----------------------------------------------------------------------------

std::string status_line(const RunHistory& h) {
  std::string s;
  if (h.results.is_object()) {
    s = "finished: results.json written after " + show_at(h.results, "steps") + " steps";
  } else if (!h.train_rows.empty()) {
    s = "unfinished (still running, or interrupted): last logged step " + std::to_string(h.last_step()) +
        " of " + (h.config ? show(h.config->train.steps) : "?");
  } else {
    s = "no training step logged yet";
  }
  if (!h.restarts.empty()) {
    s += "; resumed " + std::to_string(h.restarts.size()) + " time(s), after step";
    for (size_t i = 0; i < h.restarts.size(); ++i) s += (i ? ", " : " ") + std::to_string(h.restarts[i]);
  }
  return s;
}

// The run's name: the config's, else the folder's.
std::string run_name(const RunHistory& h) { return h.config ? h.config->name : h.dir.filename().string(); }

// The resolved config's model, data and training tables, read from its typed fields.
std::string config_tables(const RunConfig& c) {
  const ModelConfig& m = c.model;
  std::string inputs;
  for (const InputField& f : m.inputs)
    inputs += (inputs.empty() ? "" : ", ") + f.name + " (" + show(f.vocab) + ")";
  std::string position = to_string(m.position);
  if (m.position == PositionKind::kRope)
    position += " (theta " + show(m.rope.theta) + ", " + to_string(m.rope.pairing) + ")";
  std::string out =
      kv_table("Model", {
                            {"d_model", show(m.d_model)},
                            {"n_layers", show(m.n_layers)},
                            {"n_heads / n_kv_heads", show(m.n_heads) + " / " + show(m.n_kv_heads)},
                            {"position", position},
                            {"ffn", to_string(m.ffn) + " (hidden " + show(m.ffn_hidden) + ")"},
                            {"norm", to_string(m.norm) + (m.qk_norm ? ", qk_norm" : "")},
                            {"attention kernel", to_string(m.attention)},
                            {"inputs (vocab)", inputs},
                            {"output_vocab", show(m.output_vocab)},
                            {"max_seq_len", show(m.max_seq_len)},
                            {"tie_embeddings / bias", show(m.tie_embeddings) + " / " + show(m.bias)},
                            {"dropout", show(m.dropout)},
                        });
  // Every field of the config's data.kind (each kind declares its own), as the config writes them.
  // Named: a range-for over a member of a temporary would read it after it is destroyed.
  const json written = config_to_json(c);
  std::vector<std::pair<std::string, std::string>> data;
  for (const auto& [field, value] : written.at("data").items()) data.emplace_back(field, show(value));
  out += kv_table("Data", data);
  const TrainConfig& t = c.train;
  out += kv_table("Training",
                  {
                      {"steps", show(t.steps)},
                      {"batch_size \u00d7 grad_accum", show(t.batch_size) + " \u00d7 " + show(t.grad_accum)},
                      {"lr (peak)", show(t.optimizer.lr)},
                      {"schedule", to_string(t.schedule.kind) + ", warmup " + show(t.schedule.warmup_steps)},
                      {"weight_decay", show(t.optimizer.weight_decay)},
                      {"grad_clip", show(t.grad_clip)},
                      {"log / eval / checkpoint every",
                       show(t.log_every) + " / " + show(t.eval_every) + " / " + show(t.checkpoint_every)},
                      {"seed / device / threads", show(c.seed) + " / " + c.device + " / " + show(c.threads)},
                  });
  return out;
}

std::string header_section(const RunHistory& h) {
  std::string out = "<header>\n<h1>" + xml_escape(run_name(h)) + "</h1>\n";
  out += "<p class=\"meta\">run folder <code>" + xml_escape(h.dir.string()) + "</code> \u00b7 " +
         xml_escape(h.config ? to_string(h.config->data.kind) : "?") + " \u00b7 " +
         xml_escape(status_line(h)) + "</p>\n</header>\n";

  out += "<section id=\"summary\"><h2>Run</h2>\n<div class=\"cols\">\n";
  if (h.config) out += config_tables(*h.config);
  if (h.results.is_object()) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& [k, v] : h.results.items()) {
      if (!v.is_structured()) rows.emplace_back(k, show(v));
    }
    out += kv_table("Final results (results.json)", rows);
  }
  out += "</div>\n";
  if (!h.config) out += note("config.json does not read as a config of this build: " + h.config_problem);
  if (!h.results.is_object())
    out += note("No results.json yet: the run has not finished (or was interrupted).");
  if (h.skipped_lines > 0) {
    out += note(
        std::to_string(h.skipped_lines) +
        " unreadable line(s) of metrics.jsonl skipped (a torn last line while the run is being written).");
  }
  std::string ck = h.checkpoints.empty() ? "none" : "";
  for (const std::string& name : h.checkpoints) ck += (ck.empty() ? "" : ", ") + name;
  out += "<p class=\"meta\">checkpoints: " + xml_escape(ck) +
         (h.latest.empty() ? "" : "; LATEST = " + xml_escape(h.latest)) + "</p>\n</section>\n";
  return out;
}

// What every training chart shares: the rows, the x range (every chart spans the run's logged steps, so
// they line up by eye), the restarts marked, and the steps flagged as spikes.
struct ChartRows {
  const RunHistory& h;
  const std::vector<json>& train;
  const std::vector<json>& eval;
  const TaskTraits* traits;  // nullptr when config.json does not read
  std::vector<svg::RefLine> resumed;
  double first_step = NAN, last_step = NAN;
  std::vector<std::pair<double, double>> spikes_loss, spikes_grad;
  std::string spike_caption;

  explicit ChartRows(const RunHistory& history)
      : h(history),
        train(history.train_rows),
        eval(history.eval_rows),
        traits(history.config ? &task_traits(history.config->data.kind) : nullptr) {
    for (int64_t step : h.restarts) resumed.push_back({static_cast<double>(step), "resumed", "#8a6d00"});
    for (const auto* rows : {&train, &eval}) {
      for (const json& r : *rows) {
        const double step = number_at(r, "step");
        if (!std::isfinite(step)) continue;
        first_step = std::isfinite(first_step) ? std::min(first_step, step) : step;
        last_step = std::isfinite(last_step) ? std::max(last_step, step) : step;
      }
    }
    spikes_loss = flagged_points(train, "spike", "loss");
    spikes_grad = flagged_points(train, "spike", "grad_norm");
    spike_caption = !has_field(train, "spike") ? "Rows carry no spike flag."
                    : spikes_loss.empty()
                        ? "No step flagged as a spike."
                        : std::to_string(spikes_loss.size()) + " step(s) flagged as spikes (red).";
  }

  bool lab() const { return traits != nullptr && traits->has_lab_checks; }

  svg::LineChart chart(const std::string& title, const std::string& y_label, bool log_y) const {
    svg::LineChart c;
    c.title = title;
    c.x_label = "step (optimizer steps completed)";
    c.y_label = y_label;
    c.log_y = log_y;
    c.x_lines = resumed;
    c.x_min = first_step;
    c.x_max = last_step;
    return c;
  }
};

constexpr const char* kRed = "#d62728";
constexpr const char* kGrey = "#9a9a9a";

// Train loss, eval loss on top, spikes marked; the lab's pass line for retrieval.
std::string loss_chart(const ChartRows& rows) {
  svg::LineChart c = rows.chart("Loss", "loss (nats/token, log scale)", true);
  c.series.push_back(series("train loss", field_points(rows.train, "loss"), "#1f77b4"));
  const std::string eval_field = has_field(rows.eval, "val_loss") ? "val_loss" : "test_loss";
  const auto eval_points = field_points(rows.eval, eval_field);
  if (!eval_points.empty()) {
    const bool test = rows.traits != nullptr && std::string(rows.traits->held_out_split) == "test";
    // A LoRA run evaluates its own adapters on the base while it trains.
    const bool lora = rows.h.config && rows.h.config->train.lora.enabled();
    svg::Series s = series(std::string(test ? "test loss" : "validation loss") +
                               (lora ? " (eval, adapters of this run)" : " (eval)"),
                           eval_points, "#ff7f0e", svg::SeriesStyle::kLineMarkers);
    s.marker_radius = 3.5;
    c.series.push_back(s);
  }
  if (!rows.spikes_loss.empty())
    c.series.push_back(series("spike", rows.spikes_loss, kRed, svg::SeriesStyle::kMarkers));
  std::string caption = "Mean cross-entropy over the step's label positions. " + rows.spike_caption;
  const double initial =
      number_at(rows.h.results, "initial_loss", number_at(rows.h.latest_state, "initial_loss"));
  const LabCheck* loss_check = find_lab_check("test_loss");
  if (rows.lab() && loss_check != nullptr && std::isfinite(initial)) {
    c.y_lines.push_back({lab_check_threshold(*loss_check, json{{"initial_loss", initial}}),
                         "pass: test loss " + lab_check_rule(*loss_check), "#1a7f37"});
    c.y_lines.push_back({initial, "initial loss", kGrey});
  }
  if (eval_points.empty()) caption += " No eval rows yet.";
  return chart_card(c, caption);
}

// The global norm before clipping, after it (logged, or min(norm, clip)), the clip and the clipped steps.
std::string grad_norm_chart(const ChartRows& rows) {
  if (!has_field(rows.train, "grad_norm")) return note_card("Gradient norm", "Rows carry no grad_norm.");
  svg::LineChart c = rows.chart("Gradient norm", "global L2 norm (log scale)", true);
  const auto before = field_points(rows.train, "grad_norm");
  c.series.push_back(series("before clipping", before, "#9467bd"));
  const double clip = rows.h.config ? rows.h.config->train.grad_clip : 0.0;
  std::string caption = "Global gradient norm over all parameters. ";
  std::vector<std::pair<double, double>> after;
  std::string after_name = "after clipping";
  if (has_field(rows.train, "grad_norm_after_clip")) {
    after = field_points(rows.train, "grad_norm_after_clip");
  } else if (clip > 0) {
    after = before;
    for (auto& p : after) p.second = std::min(p.second, clip);
    after_name = "after clipping (min(norm, clip))";
  }
  if (!after.empty()) {
    svg::Series s = series(after_name, after, "#17becf");
    s.dashed = true;
    s.layer = -1;  // under the norm before clipping: it shows only where the two differ
    c.series.push_back(s);
  }
  if (clip > 0) {
    c.y_lines.push_back({clip, "grad_clip " + svg::format_number(clip), kGrey});
  } else {
    caption += "Clipping is off (grad_clip 0). ";
  }
  const auto clipped = flagged_points(rows.train, "clipped", "grad_norm");
  if (!clipped.empty()) {
    svg::Series s = series("clipped step", clipped, kGrey, svg::SeriesStyle::kMarkers);
    s.hollow = true;
    s.marker_radius = 2.5;
    c.series.push_back(s);
    caption += std::to_string(clipped.size()) + " of " + std::to_string(before.size()) +
               " logged steps clipped (grey rings). ";
  }
  if (!rows.spikes_grad.empty())
    c.series.push_back(series("spike", rows.spikes_grad, kRed, svg::SeriesStyle::kMarkers));
  return chart_card(c, caption + rows.spike_caption);
}

// A chart of one field of the train rows.
struct FieldChart {
  std::string field, title, y_label, name, color, caption;
  std::string missing;  // the note when no row has the field; "" leaves the card out
};

std::string field_chart(const ChartRows& rows, const FieldChart& spec) {
  if (!has_field(rows.train, spec.field))
    return spec.missing.empty() ? "" : note_card(spec.title, spec.missing);
  svg::LineChart c = rows.chart(spec.title, spec.y_label, false);
  c.series.push_back(series(spec.name, field_points(rows.train, spec.field), spec.color));
  return chart_card(c, spec.caption);
}

// A per-block list field: one line per block, coloured by depth, plus whole-model fields dashed.
struct BlockChart {
  std::string field, title, y_label;
  bool log_y;
  std::string caption;
  std::vector<std::string> extra_fields;
};

std::string block_chart(const ChartRows& rows, const BlockChart& spec) {
  const auto lists = list_field_points(rows.train, spec.field);
  if (lists.empty()) {
    return note_card(
        spec.title,
        "Rows carry no " + spec.field + " list" +
            (spec.field == "act_rms" ? "."
                                     : " (logged every train.diag_every steps by trainers that record it)."));
  }
  svg::LineChart c = rows.chart(spec.title, spec.y_label, spec.log_y);
  for (size_t i = 0; i < lists.size(); ++i)
    c.series.push_back(series("block " + std::to_string(i), lists[i], svg::ramp_color(i, lists.size())));
  for (size_t i = 0; i < spec.extra_fields.size(); ++i) {
    const auto points = field_points(rows.train, spec.extra_fields[i]);
    if (points.empty()) continue;
    svg::Series s = series(spec.extra_fields[i], points, i == 0 ? kRed : "#ff7f0e");
    s.dashed = true;
    c.series.push_back(s);
  }
  return chart_card(c, spec.caption);
}

// The eval rows' figures besides the loss: the lab's controls for retrieval, bits per byte for text.
std::string eval_chart(const ChartRows& rows) {
  const std::vector<json>& eval = rows.eval;
  if (rows.lab() && (has_field(eval, "test_accuracy") || has_field(eval, "val_accuracy"))) {
    // Periodic rows score the validation split; the final row adds the test split.
    const bool val = has_field(eval, "val_accuracy");
    svg::LineChart c = rows.chart("Retrieval accuracy (eval rows)",
                                  val ? "fraction of validation queries" : "fraction of test queries", false);
    c.y_min = 0.0;
    c.y_max = 1.0;
    const std::vector<std::array<const char*, 3>> lines =
        val ? std::vector<std::array<const char*, 3>>{{"val_accuracy", "validation accuracy", "#1f77b4"},
                                                      {"val_no_context_accuracy",
                                                       "validation no-context accuracy", "#7f7f7f"},
                                                      {"val_intervention_accuracy",
                                                       "validation intervention accuracy", "#2ca02c"},
                                                      {"test_accuracy", "test accuracy (end)", kRed}}
            : std::vector<std::array<const char*, 3>>{
                  {"test_accuracy", "test accuracy", "#1f77b4"},
                  {"no_context_accuracy", "no-context accuracy", "#7f7f7f"},
                  {"intervention_accuracy", "intervention accuracy", "#2ca02c"}};
    for (const auto& [field, name, color] : lines) {
      const auto points = field_points(eval, field);
      if (!points.empty()) c.series.push_back(series(name, points, color, svg::SeriesStyle::kLineMarkers));
    }
    for (const auto& [field, name, color] : {std::tuple{"test_accuracy", "accuracy pass ", "#1a7f37"},
                                             std::tuple{"no_context_accuracy", "no-context pass ", kGrey}}) {
      const LabCheck& check = *find_lab_check(field);
      c.y_lines.push_back({check.bound, name + lab_check_rule(check), color});
    }
    return chart_card(c, "Controls at each evaluation (see the table below for the final figures).");
  }
  if (has_field(eval, "val_bits_per_byte")) {
    svg::LineChart c = rows.chart("Validation bits per byte (eval rows)", "bits per byte", false);
    c.series.push_back(series("val bits/byte", field_points(eval, "val_bits_per_byte"), "#ff7f0e",
                              svg::SeriesStyle::kLineMarkers));
    return chart_card(c, "Validation loss in bits per byte of text.");
  }
  return "";
}

// train.eval_tasks: each benchmark's acc_norm (solid) and acc (dashed) at every evaluation, with chance.
std::string benchmark_chart(const ChartRows& rows) {
  std::vector<std::string> names;
  for (const json& row : rows.eval) {
    for (const std::string& name : benchmark_names(row))
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  if (names.empty()) return "";
  svg::LineChart c = rows.chart("Benchmarks (eval rows)", "fraction of items right", false);
  c.y_min = 0.0;
  c.y_max = 1.0;
  std::vector<double> chances;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string color = svg::palette_color(i);
    c.series.push_back(series(names[i] + " acc_norm",
                              field_points(rows.eval, benchmark_key(names[i], "acc_norm")), color,
                              svg::SeriesStyle::kLineMarkers));
    svg::Series acc =
        series(names[i] + " acc", field_points(rows.eval, benchmark_key(names[i], "acc")), color);
    acc.dashed = true;
    c.series.push_back(acc);
    const auto chance = field_points(rows.eval, benchmark_key(names[i], "chance"));
    if (!chance.empty() && std::find(chances.begin(), chances.end(), chance.back().second) == chances.end()) {
      chances.push_back(chance.back().second);
      c.y_lines.push_back(
          {chance.back().second, "chance " + svg::format_number(chance.back().second), kGrey});
    }
  }
  return chart_card(
      c,
      "Multiple-choice benchmarks (train.eval_tasks) at each evaluation: acc_norm solid, acc dashed; "
      "the final figures with their 95% intervals are in results.json.");
}

std::string charts_section(const RunHistory& h) {
  std::string out = "<section id=\"charts\"><h2>Training curves</h2>\n";
  if (h.train_rows.empty() && h.eval_rows.empty())
    return out + note("metrics.jsonl holds no rows yet.") + "</section>\n";
  const ChartRows rows(h);
  const std::string schedule = h.config ? to_string(h.config->train.schedule.kind) : "?";
  const std::vector<BlockChart> blocks = {
      {"act_rms",
       "Activation RMS per block",
       "RMS of the residual stream",
       false,
       "Residual stream RMS after each block (last micro-batch of the step).",
       {}},
      {"layer_grad_norm",
       "Gradient norm per block",
       "L2 norm (log scale)",
       true,
       "Gradient norm of each block's parameters before clipping.",
       {"embed_grad_norm", "head_grad_norm"}},
      {"update_ratio",
       "Update / weight ratio per block",
       "ratio (log scale)",
       true,
       "||w_after - w_before|| / ||w_before|| over each block's parameters.",
       {}},
  };
  const std::vector<FieldChart> resources = {
      // Largest logit: an early sign of runaway scale.
      {"max_abs_logit", "Largest |logit|", "max |logit|", "max |logit|", "#e377c2",
       "Largest absolute logit of the step's last micro-batch.", ""},
      {"mfu", "Model FLOPs utilisation", "MFU (fraction of measured peak)", "MFU", "#bcbd22",
       "Training FLOPs per second over the matmul peak measured on this machine.", ""},
      {"peak_rss_mib", "Peak memory", "peak resident set (MiB)", "peak RSS", "#7f7f7f",
       "Largest resident memory of the training process so far.", ""},
  };
  out += "<div class=\"grid\">\n";
  out += loss_chart(rows);
  out +=
      field_chart(rows, {"lr", "Learning rate", "learning rate", "lr", "#2ca02c",
                         "Learning rate used by the step (" + schedule + " schedule).", "Rows carry no lr."});
  out += grad_norm_chart(rows);
  out +=
      field_chart(rows, {"tokens_per_s", "Throughput", "tokens/s (input positions, padding included)",
                         "tokens/s", "#8c564b", "Input positions per second since the previous logged row.",
                         "Rows carry no tokens_per_s."});
  for (const BlockChart& spec : blocks) out += block_chart(rows, spec);
  for (const FieldChart& spec : resources) out += field_chart(rows, spec);
  out += eval_chart(rows);
  out += benchmark_chart(rows);
  return out + "</div>\n</section>\n";
}

// Accuracy cell with a small bar.
std::string accuracy_cell(const json& v) {
  if (!v.is_number()) return "<td>\u2014</td>";
  const double a = v.get<double>();
  return fmt::format("<td class=\"num\">{} <span class=\"bar\" style=\"width:{:.0f}px\"></span></td>",
                     svg::format_number(a), std::clamp(a, 0.0, 1.0) * 60.0);
}

std::string breakdown_table(const std::string& title, const std::string& key_name, const json& groups,
                            bool with_loss, const std::string& trained_key) {
  std::string out = "<div class=\"box\"><h3>" + xml_escape(title) + "</h3>";
  if (!groups.is_object() || groups.empty()) return out + "<p class=\"cap\">not recorded</p></div>\n";
  std::vector<std::pair<long long, std::string>> keys;
  for (const auto& [k, v] : groups.items()) keys.emplace_back(std::atoll(k.c_str()), k);
  std::sort(keys.begin(), keys.end());
  out += "<table><tr><th>" + xml_escape(key_name) + "</th><th>count</th><th>accuracy</th>" +
         (with_loss ? "<th>loss</th>" : "") + "</tr>\n";
  for (const auto& [n, k] : keys) {
    const json& g = groups[k];
    out += "<tr><td>" + xml_escape(k) + (k == trained_key ? " (trained)" : "") + "</td><td class=\"num\">" +
           show_at(g, "count") + "</td>" + accuracy_cell(g.value("accuracy", json())) +
           (with_loss ? "<td class=\"num\">" + show_at(g, "loss") + "</td>" : "") + "</tr>\n";
  }
  return out + "</table></div>\n";
}

std::string controls_section(const RunHistory& h) {
  std::string out = "<section id=\"controls\"><h2>Retrieval controls</h2>\n";
  json figures;
  std::string source;
  if (h.results.is_object() && h.results.contains("test_accuracy")) {
    figures = h.results;
    source = run_files::kResults;
  } else {
    for (auto it = h.eval_rows.rbegin(); it != h.eval_rows.rend(); ++it) {
      if (it->contains("test_accuracy")) {
        figures = *it;
        source = "the latest eval row (step " + show_at(*it, "step") + "): the run has not finished";
        break;
      }
      // Periodic rows score the validation split (val_*): shown under the control names, labelled.
      if (it->contains("val_accuracy")) {
        figures = json::object();
        for (const auto& [key, value] : it->items()) {
          if (key.rfind("val_", 0) != 0) continue;
          const std::string bare = key.substr(4);
          figures[bare == "loss" || bare == "accuracy" ? "test_" + bare : bare] = value;
        }
        source = "the latest eval row (step " + show_at(*it, "step") +
                 ") on the validation split: the run has not finished";
        break;
      }
    }
  }
  if (figures.is_null())
    return out + note("No retrieval evaluation yet (no results.json, no eval rows).") + "</section>\n";
  const double initial = number_at(h.results, "initial_loss", number_at(h.latest_state, "initial_loss"));

  // The thresholds relative to the initial loss need it beside the figures.
  json judged = figures;
  if (std::isfinite(initial)) judged["initial_loss"] = initial;
  out +=
      "<p class=\"meta\">From " + xml_escape(source) +
      "; thresholds of the retrieval lab (docs/retrieval-lab.md)" +
      (std::isfinite(initial) ? "; initial loss " + svg::format_number(initial) : "; initial loss unknown") +
      ".</p>\n<div class=\"cols\">\n<div class=\"box\"><table>\n"
      "<tr><th>control</th><th>value</th><th>pass if</th><th>result</th></tr>\n";
  for (const LabCheck& c : lab_checks()) {
    const json v = figures.value(c.field, json());
    std::string verdict = "\u2014";
    if (v.is_number()) {
      verdict = lab_check_passes(c, v.get<double>(), judged) ? "<span class=\"pass\">PASS</span>"
                                                             : "<span class=\"fail\">FAIL</span>";
    }
    std::string rule = lab_check_rule(c);
    const double threshold = lab_check_threshold(c, judged);
    if (c.relative_to != nullptr && std::isfinite(threshold)) rule += " = " + svg::format_number(threshold);
    if (*c.note) rule += std::string(" (") + c.note + ")";
    out += "<tr><td>" + xml_escape(c.label) + "</td><td class=\"num\">" + (v.is_null() ? "\u2014" : show(v)) +
           "</td><td>" + xml_escape(rule) + "</td><td>" + verdict + "</td></tr>\n";
  }
  out += "</table></div>\n";
  out += breakdown_table("By evidence position", "queried record",
                         figures.value("by_evidence_position", json()), false, "");
  out += breakdown_table("By distractors", "distractors", figures.value("by_distractors", json()), false, "");
  out += breakdown_table("By pairs (context length)", "pairs", figures.value("by_pairs", json()), true,
                         h.config ? show(h.config->data.pairs) : "");
  return out + "</div>\n</section>\n";
}

std::string attention_section(const RunHistory& h) {
  std::string out = "<section id=\"attention\"><h2>Attention</h2>\n";
  AttentionSample sample;
  try {
    sample = sample_attention(h.dir.string());
  } catch (const std::exception& e) {
    const std::string why = h.checkpoints.empty() ? "the run has no checkpoint" : e.what();
    return out + note("No attention heatmap: " + why + ".") + "</section>\n";
  }
  const int64_t t = sample.length;
  out += "<p class=\"meta\">Checkpoint <code>" + xml_escape(sample.checkpoint) + "</code> (step " +
         std::to_string(sample.step) + "); " + xml_escape(sample.input) + ".</p>\n";
  if (!sample.outcome.empty()) {
    out += "<p class=\"meta\"><code>" + xml_escape(sample.outcome) + "</code></p>\n";
  }
  out +=
      "<p class=\"meta\">Each map: rows are queries (positions), columns the keys they attend to; colour is "
      "the attention weight. Grey cells are masked (future positions, padding, other documents).</p>\n";
  out += svg::render_color_bar(0.0, 1.0, 260, "attention weight");

  // All heads when that stays readable, else the first and the last layer.
  std::vector<int64_t> layers;
  for (int64_t l = 0; l < sample.layers; ++l) layers.push_back(l);
  constexpr int64_t kMaxMaps = 32;
  if (sample.layers * sample.heads > kMaxMaps && sample.layers > 2) {
    layers = {0, sample.layers - 1};
    out += note("Showing layers 0 and " + std::to_string(sample.layers - 1) + " of " +
                std::to_string(sample.layers) + " (too many heads to show all).");
  }
  // 32 positions at 8 px: four heads side by side on a 1280 px wide page.
  const int cell = std::clamp(static_cast<int>(270 / std::max<int64_t>(t, 1)), 8, 32);
  for (int64_t l : layers) {
    out += "<h3>Layer " + std::to_string(l) + "</h3>\n<div class=\"maps\">\n";
    for (int64_t head = 0; head < sample.heads; ++head) {
      svg::Heatmap map;
      map.title = "layer " + std::to_string(l) + " \u00b7 head " + std::to_string(head);
      map.row_labels = sample.tokens;
      map.col_labels = sample.tokens;
      map.cell = cell;
      map.cell_titles = t <= 16;
      map.values.resize(static_cast<size_t>(t * t));
      for (int64_t q = 0; q < t; ++q) {
        for (int64_t k = 0; k < t; ++k) map.values[q * t + k] = sample.weight(l, head, q, k);
      }
      map.shown = sample.allowed;
      out += svg::render_heatmap(map);
    }
    out += "</div>\n";
  }
  return out + "</section>\n";
}

}  // namespace

std::string render_report(const std::string& run_dir) {
  const RunHistory h = read_run_history(run_dir);
  std::string page = page_start("causal report: " + run_name(h));
  page += header_section(h);
  page += charts_section(h);
  if (h.config && task_traits(h.config->data.kind).has_lab_checks) page += controls_section(h);
  page += evaluations_section(evaluation_records(h));
  page += attention_section(h);
  page += page_end(h.dir.string());
  return page;
}

std::string render_summary(const std::string& run_dir) {
  return evaluations_summary(evaluation_records(read_run_history(run_dir)));
}

std::string write_report(const std::string& run_dir) {
  const std::string page = render_report(run_dir);
  const fs::path target = fs::path(run_dir) / run_files::kReport;
  io_as<RunFolderError>([&] { write_file_atomically(target, page); });
  return target.string();
}

}  // namespace causal
