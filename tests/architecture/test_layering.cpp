// The layering of src/ (declared in src/LAYERS): every #include points down, never up or sideways, and
// the folders form no cycle. Checked on the source tree itself, so a new upward include fails here.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
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

// Folder -> rank (0 = lowest). Siblings share a rank.
std::map<std::string, int> read_layers(const fs::path& file) {
  std::ifstream in(file);
  std::map<std::string, int> rank;
  std::string line;
  int next = 0;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string folder;
    bool any = false;
    while (words >> folder) {
      rank[folder] = next;
      any = true;
    }
    if (any) ++next;
  }
  return rank;
}

struct Include {
  std::string file;  // relative to src/
  int line = 0;
  std::string from, to;  // folders
};

// Every `#include "folder/..."` of a project folder in src/, by the folder that holds the including file.
std::vector<Include> project_includes(const fs::path& src) {
  const std::regex include(R"(^\s*#\s*include\s+"([^/"]+)/)");
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
      if (std::regex_search(line, m, include) && fs::is_directory(src / m[1].str()))
        out.push_back({rel.string(), number, rel.begin()->string(), m[1].str()});
    }
  }
  return out;
}

// A cycle in the folder graph as "a -> b -> a", or "" when there is none.
std::string find_cycle(const std::map<std::string, std::set<std::string>>& edges) {
  std::map<std::string, int> state;  // 0 unvisited, 1 on the path, 2 done
  std::vector<std::string> path;
  std::string cycle;
  std::function<bool(const std::string&)> visit = [&](const std::string& node) {
    state[node] = 1;
    path.push_back(node);
    auto it = edges.find(node);
    if (it != edges.end()) {
      for (const std::string& next : it->second) {
        if (state[next] == 1) {
          auto start = std::find(path.begin(), path.end(), next);
          for (auto p = start; p != path.end(); ++p) cycle += *p + " -> ";
          cycle += next;
          return true;
        }
        if (state[next] == 0 && visit(next)) return true;
      }
    }
    path.pop_back();
    state[node] = 2;
    return false;
  };
  for (const auto& [node, targets] : edges) {
    if (state[node] == 0 && visit(node)) return cycle;
  }
  return "";
}

}  // namespace

CATCH_TEST_CASE("layers: every include points to a lower layer and no folders form a cycle",
                "[unit][architecture]") {
  const fs::path src = fs::path(CAUSAL_SOURCE_DIR) / "src";
  const std::map<std::string, int> rank = read_layers(src / "LAYERS");
  CATCH_REQUIRE(rank.size() >= 10);  // the table was read, not an empty file

  // Every folder of src/ has a place in the table.
  for (const auto& entry : fs::directory_iterator(src)) {
    if (!entry.is_directory()) continue;
    CATCH_INFO("src/" << entry.path().filename().string() << " is not listed in src/LAYERS");
    CATCH_CHECK(rank.count(entry.path().filename().string()) == 1);
  }

  const std::vector<Include> includes = project_includes(src);
  CATCH_REQUIRE(includes.size() > 100);  // the scan found the project's includes
  std::map<std::string, std::set<std::string>> edges;
  for (const Include& inc : includes) {
    if (inc.from == inc.to) continue;
    edges[inc.from].insert(inc.to);
    CATCH_INFO("src/" << inc.file << ":" << inc.line << " includes " << inc.to << "/ from " << inc.from
                      << "/: only folders on earlier lines of src/LAYERS may be included");
    CATCH_CHECK(rank.count(inc.from) == 1);
    CATCH_CHECK(rank.count(inc.to) == 1);
    if (rank.count(inc.from) && rank.count(inc.to)) CATCH_CHECK(rank.at(inc.to) < rank.at(inc.from));
  }
  CATCH_INFO("folder cycle: " << find_cycle(edges));
  CATCH_CHECK(find_cycle(edges).empty());
}

CATCH_TEST_CASE("layers: the cycle finder reports a cycle and accepts a chain", "[unit][architecture]") {
  CATCH_CHECK(find_cycle({{"a", {"b"}}, {"b", {"c"}}}).empty());
  CATCH_CHECK(find_cycle({{"a", {"b"}}, {"b", {"c"}}, {"c", {"a"}}}) == "a -> b -> c -> a");
}

CATCH_TEST_CASE("layers: the build compiles exactly the layers src/LAYERS declares", "[unit][architecture]") {
  const fs::path root = fs::path(CAUSAL_SOURCE_DIR);
  std::map<std::string, int> declared = read_layers(root / "src" / "LAYERS");
  declared.erase("cli");  // the executable, not part of the library
  std::ifstream in(root / "CMakeLists.txt");
  const std::string cmake((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::smatch m;
  CATCH_REQUIRE(std::regex_search(cmake, m, std::regex(R"(set\(CAUSAL_LAYERS([^)]*)\))")));
  std::istringstream words(m[1].str());
  std::set<std::string> built;
  for (std::string w; words >> w;) built.insert(w);
  std::set<std::string> expected;
  for (const auto& [folder, rank] : declared) expected.insert(folder);
  CATCH_CHECK(built == expected);
  // A layer the build globs must exist (a glob of a missing folder compiles nothing and says nothing).
  for (const std::string& folder : built) {
    CATCH_INFO("src/" << folder);
    CATCH_CHECK(fs::is_directory(root / "src" / folder));
  }
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
