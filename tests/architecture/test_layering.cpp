// The layering of src/ (the table in src/LAYERS): every #include is one the including layer's line allows,
// every use a line lists is real, and the build compiles exactly the table's folders. Checked on the source
// tree itself, so a new include that points up or sideways fails here.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Layer {
  int rank = 0;                // its line, 0 = lowest
  bool everything = false;     // "*": may include any layer
  std::set<std::string> uses;  // folders and single headers ("data/batch.h")
};

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// "folder | what it holds | uses" lines; '#' starts a comment line.
std::map<std::string, Layer> read_layers(const fs::path& file) {
  std::ifstream in(file);
  std::map<std::string, Layer> layers;
  int rank = 0;
  for (std::string line; std::getline(in, line);) {
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    const size_t bar1 = line.find('|'), bar2 = line.find('|', bar1 + 1);
    if (bar1 == std::string::npos || bar2 == std::string::npos) continue;
    Layer layer;
    layer.rank = rank++;
    std::istringstream uses(line.substr(bar2 + 1));
    for (std::string use; uses >> use;) {
      if (use == "*") layer.everything = true;
      if (use != "-" && use != "*") layer.uses.insert(use);
    }
    layers[trim(line.substr(0, bar1))] = layer;
  }
  return layers;
}

struct Include {
  std::string file;  // relative to src/
  int line = 0;
  std::string from;    // the including file's folder
  std::string to;      // the included folder
  std::string header;  // "folder/file.h"
};

// Every `#include "folder/..."` of a project folder in src/, by the folder that holds the including file.
std::vector<Include> project_includes(const fs::path& src) {
  const std::regex include(R"re(^\s*#\s*include\s+"(([^/"]+)/[^"]+)")re");
  std::vector<Include> out;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cpp") continue;
    const fs::path rel = fs::relative(entry.path(), src);
    std::ifstream in(entry.path());
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      std::smatch m;
      if (std::regex_search(line, m, include) && fs::is_directory(src / m[2].str()))
        out.push_back({rel.string(), number, rel.begin()->string(), m[2].str(), m[1].str()});
    }
  }
  return out;
}

// Why `layers` forbids `inc` ("" when it is allowed); `used` collects the uses that allowed something.
std::string forbidden(const std::map<std::string, Layer>& layers, const Include& inc,
                      std::set<std::pair<std::string, std::string>>& used) {
  if (inc.from == inc.to) return "";
  const auto from = layers.find(inc.from);
  if (from == layers.end()) return "src/" + inc.from + " has no line in src/LAYERS";
  const auto to = layers.find(inc.to);
  if (to == layers.end()) return "src/" + inc.to + " has no line in src/LAYERS";
  if (to->second.rank >= from->second.rank) return inc.to + " is not on an earlier line than " + inc.from;
  if (from->second.everything) return "";
  for (const std::string& use : {inc.to, inc.header}) {
    if (from->second.uses.count(use)) {
      used.insert({inc.from, use});
      return "";
    }
  }
  return inc.from + "'s line in src/LAYERS does not list " + inc.to + " (or " + inc.header + ")";
}

}  // namespace

CATCH_TEST_CASE("layers: every include is one src/LAYERS allows, and every use it lists is real",
                "[unit][architecture]") {
  const fs::path src = fs::path(CAUSAL_SOURCE_DIR) / "src";
  const std::map<std::string, Layer> layers = read_layers(src / "LAYERS");
  CATCH_REQUIRE(layers.size() >= 10);  // the table was read, not an empty file

  for (const auto& entry : fs::directory_iterator(src)) {
    if (!entry.is_directory()) continue;
    CATCH_INFO("src/" << entry.path().filename().string() << " is not listed in src/LAYERS");
    CATCH_CHECK(layers.count(entry.path().filename().string()) == 1);
  }
  // Uses name earlier lines only, so the table itself has no cycle.
  for (const auto& [name, layer] : layers) {
    for (const std::string& use : layer.uses) {
      const std::string folder = use.substr(0, use.find('/'));
      CATCH_INFO(name << " uses " << use);
      CATCH_CHECK(layers.count(folder) == 1);
      if (layers.count(folder)) CATCH_CHECK(layers.at(folder).rank < layer.rank);
      if (use != folder) CATCH_CHECK(fs::exists(src / use));
    }
  }

  const std::vector<Include> includes = project_includes(src);
  CATCH_REQUIRE(includes.size() > 100);  // the scan found the project's includes
  std::set<std::pair<std::string, std::string>> used;
  for (const Include& inc : includes) {
    const std::string why = forbidden(layers, inc, used);
    CATCH_INFO("src/" << inc.file << ":" << inc.line << " includes " << inc.header << ": " << why);
    CATCH_CHECK(why.empty());
  }
  for (const auto& [name, layer] : layers) {
    for (const std::string& use : layer.uses) {
      CATCH_INFO(name << "'s line in src/LAYERS lists " << use << ", which no file of src/" << name
                      << " includes");
      CATCH_CHECK(used.count({name, use}) == 1);
    }
  }
}

CATCH_TEST_CASE("layers: an include the table does not allow is reported", "[unit][architecture]") {
  std::map<std::string, Layer> layers;
  layers["core"] = {0, false, {}};
  layers["data"] = {1, false, {"core/errors.h"}};
  layers["task"] = {2, false, {"core", "data"}};
  std::set<std::pair<std::string, std::string>> used;
  CATCH_CHECK(forbidden(layers, {"task/a.cpp", 1, "task", "data", "data/batch.h"}, used).empty());
  CATCH_CHECK(forbidden(layers, {"data/a.cpp", 1, "data", "core", "core/errors.h"}, used).empty());
  CATCH_CHECK_THAT(forbidden(layers, {"data/a.cpp", 1, "data", "core", "core/runtime.h"}, used),
                   Catch::Contains("does not list core"));
  CATCH_CHECK_THAT(forbidden(layers, {"data/a.cpp", 1, "data", "task", "task/task.h"}, used),
                   Catch::Contains("not on an earlier line"));
  CATCH_CHECK(used.size() == 2);
}

CATCH_TEST_CASE("layers: the build compiles the folders src/LAYERS lists, read from it",
                "[unit][architecture]") {
  const fs::path root = fs::path(CAUSAL_SOURCE_DIR);
  std::ifstream in(root / "CMakeLists.txt");
  const std::string cmake((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The list is written once: CMake reads the table instead of repeating it.
  CATCH_CHECK_THAT(cmake, Catch::Contains("src/LAYERS"));
  CATCH_CHECK_THAT(cmake, !Catch::Contains("set(CAUSAL_LAYERS core"));
}

namespace {

// GitHub's heading anchors: lowercase, punctuation dropped, spaces to hyphens.
std::string anchor_of(const std::string& heading) {
  std::string out;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_') {
      out += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      out += '-';
    } else if (c >= 0x80) {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::vector<fs::path> files_under(const fs::path& root, std::initializer_list<const char*> folders) {
  std::vector<fs::path> files = {root / "README.md"};
  for (const char* folder : folders) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder))
      if (entry.is_regular_file()) files.push_back(entry.path());
  }
  return files;
}

}  // namespace

CATCH_TEST_CASE("docs that code, tests and docs point at exist, with their sections",
                "[unit][architecture]") {
  const fs::path root = fs::path(CAUSAL_SOURCE_DIR);
  const std::regex reference(R"(docs/([a-z-]+\.md)(#[a-z0-9_-]+)?)");
  int checked = 0;
  {
    for (const fs::path& file : files_under(root, {"src", "tests", "docs", "tools", "configs"})) {
      std::ifstream in(file);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (std::sregex_iterator it(text.begin(), text.end(), reference), end; it != end; ++it) {
        const fs::path doc = root / "docs" / (*it)[1].str();
        CATCH_INFO(fs::relative(file, root).string() << " points at " << it->str());
        CATCH_REQUIRE(fs::exists(doc));
        ++checked;
        if (!(*it)[2].matched) continue;
        std::ifstream doc_in(doc);
        std::set<std::string> anchors;
        for (std::string line; std::getline(doc_in, line);) {
          if (line.rfind("#", 0) == 0)
            anchors.insert("#" + anchor_of(line.substr(line.find_first_not_of("# "))));
        }
        CATCH_CHECK(anchors.count((*it)[2].str()) == 1);
      }
    }
  }
  CATCH_CHECK(checked > 10);
}

namespace {

// Every path into src/, tests/ or tools/ that `text` names (in a markdown link, relative like ../src/x, or
// in inline code), with trailing punctuation dropped. `*` may stand in the last component.
std::vector<std::string> named_paths(const std::string& text) {
  const std::regex path(R"((?:^|[^A-Za-z0-9_/.-]|\.\./)((?:src|tests|tools)/[A-Za-z0-9_./*-]*))");
  std::vector<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), path), end; it != end; ++it) {
    std::string p = (*it)[1].str();
    while (!p.empty() && (p.back() == '.' || p.back() == ',')) p.pop_back();
    out.push_back(p);
  }
  return out;
}

// Whether `rel` (relative to `root`) exists; a `*` in its last component must match at least one entry.
bool path_exists(const fs::path& root, const std::string& rel) {
  const size_t star = rel.find('*');
  if (star == std::string::npos) return fs::exists(root / rel);
  const size_t slash = rel.rfind('/');
  if (rel.find('/', star) != std::string::npos) return false;  // a wildcard folder: say what you mean
  const std::string name = rel.substr(slash + 1);
  std::string pattern;
  for (const char c : name) {
    if (c == '*') {
      pattern += ".*";
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      pattern += c;
    } else {
      pattern += std::string("[") + c + "]";  // literal, whatever regex meaning it has outside a class
    }
  }
  const std::regex match(pattern);
  const fs::path dir = root / rel.substr(0, slash);
  if (!fs::is_directory(dir)) return false;
  for (const auto& entry : fs::directory_iterator(dir))
    if (std::regex_match(entry.path().filename().string(), match)) return true;
  return false;
}

}  // namespace

CATCH_TEST_CASE("docs: the path finder catches links, relative links, inline code and wildcards",
                "[unit][architecture]") {
  const std::vector<std::string> found = named_paths(
      "see [x](../src/core/errors.h), `tests/support/cli.h`. Run `tools/run --version`, then src/LAYERS, "
      "and `src/data/tokenizer.*` or `tests/test_gone.cpp`; not mysrc/x nor a/tests/y.");
  CATCH_CHECK(found == std::vector<std::string>{"src/core/errors.h", "tests/support/cli.h", "tools/run",
                                                "src/LAYERS", "src/data/tokenizer.*", "tests/test_gone.cpp"});
  const fs::path root = fs::path(CAUSAL_SOURCE_DIR);
  CATCH_CHECK(path_exists(root, "src/core/errors.h"));
  CATCH_CHECK(path_exists(root, "src/data/tokenizer.*"));
  CATCH_CHECK_FALSE(path_exists(root, "tests/test_gone.cpp"));
  CATCH_CHECK_FALSE(path_exists(root, "src/data/no_such_file.*"));
}

// Docs name code by path; a file moved without its docs leaves a reader at nothing.
CATCH_TEST_CASE("docs: every src/, tests/ and tools/ path that README.md and docs/*.md name exists",
                "[unit][architecture]") {
  const fs::path root = fs::path(CAUSAL_SOURCE_DIR);
  std::vector<fs::path> docs = {root / "README.md"};
  for (const auto& entry : fs::directory_iterator(root / "docs"))
    if (entry.path().extension() == ".md") docs.push_back(entry.path());
  int checked = 0;
  std::vector<std::string> missing;
  for (const fs::path& doc : docs) {
    std::ifstream in(doc);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const std::string& path : named_paths(text)) {
      ++checked;
      if (!path_exists(root, path)) missing.push_back(fs::relative(doc, root).string() + ": " + path);
    }
  }
  std::string list;
  for (const std::string& m : missing) list += "\n  " + m;
  CATCH_INFO(checked << " paths checked; missing:" << list);
  CATCH_CHECK(missing.empty());
  CATCH_CHECK(checked > 100);  // guards against a path pattern that matches nothing
}
