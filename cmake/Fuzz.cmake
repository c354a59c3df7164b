# libFuzzer harnesses (tests/fuzz/, docs/faults.md#fuzzing): each harness compiles only the parser
# sources it needs, with -fsanitize=fuzzer,address,undefined, and none links LibTorch, so the fuzz build
# (build-fuzz/, `tools/fuzz`) takes minutes, not the LibTorch build's hour under ASan. Included by
# CMakeLists.txt instead of everything else when CAUSAL_FUZZ is on; clang only.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "CAUSAL_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++ "
    "(tools/fuzz does), got ${CMAKE_CXX_COMPILER_ID}")
endif()
# tools/setup.sh passes every build its LibTorch; the harnesses use none, but the cache keeps the value typed
# as setup.sh checks it, so the build is not configured again on every call.
set(CAUSAL_TORCH_ROOT "${CAUSAL_TORCH_ROOT}" CACHE PATH "LibTorch (unused by the fuzz build)")
set(CAUSAL_CUDA "${CAUSAL_CUDA}" CACHE BOOL "CUDA (unused by the fuzz build)")
find_package(nlohmann_json 3.9 REQUIRED)
# spdlog only for the fmt it brings (number formatting in the parsers' messages), as in the main build.
find_package(spdlog REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
find_package(ZLIB REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

# -O1 -g: fast enough to fuzz, and ASan's reports name lines.
set(CAUSAL_FUZZ_COMPILE -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
  -fno-sanitize-recover=undefined -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror)
set(src ${CMAKE_SOURCE_DIR}/src)
file(GLOB CAUSAL_FUZZ_CONFIG_SOURCES CONFIGURE_DEPENDS ${src}/config/*.cpp)

# The parser sources, by what the harnesses share; each an object library compiled once.
set(CAUSAL_FUZZ_PARTS core config io checkpoint data sweep interop)
set(CAUSAL_FUZZ_core ${src}/core/errors.cpp ${src}/core/hex.cpp)
set(CAUSAL_FUZZ_config ${CAUSAL_FUZZ_CONFIG_SOURCES})
set(CAUSAL_FUZZ_io ${src}/io/sha256.cpp ${src}/io/atomic_file.cpp ${src}/io/safetensors_header.cpp
  ${src}/io/gguf_file.cpp ${src}/io/gguf_quants.cpp)
set(CAUSAL_FUZZ_checkpoint ${src}/checkpoint/checkpoint_dir.cpp)
# SentencePiece is linked into the harnesses directly (tests/fuzz/sentencepiece_linked_backend.cpp).
set(CAUSAL_FUZZ_data ${src}/data/token_file.cpp ${src}/data/token_import.cpp ${src}/data/tokenizer.cpp
  ${src}/data/sentencepiece_tokenizer.cpp ${src}/data/text_encode.cpp ${src}/data/byte_bpe_model.cpp
  ${src}/data/byte_bpe_tokenizer.cpp ${src}/data/pre_tokenizer.cpp ${src}/data/chat_template.cpp
  ${src}/data/jsonl_documents.cpp ${src}/data/benchmark_file.cpp ${src}/data/benchmark_text.cpp
  ${src}/data/python_text.cpp
  ${src}/data/sentencepiece_shim/sentencepiece_shim.cpp
  ${CMAKE_SOURCE_DIR}/tests/fuzz/sentencepiece_linked_backend.cpp)
set(CAUSAL_FUZZ_sweep ${src}/sweep/sweep_spec.cpp)
# What import reads before any tensor is converted (the conversions themselves need LibTorch).
set(CAUSAL_FUZZ_interop ${src}/interop/gguf_model_config.cpp
  ${src}/interop/hf_model_config.cpp ${src}/interop/model_from_provenance.cpp ${src}/interop/tensor_map.cpp
  ${src}/interop/vocab.cpp)
foreach(part ${CAUSAL_FUZZ_PARTS})
  add_library(causal_fuzz_${part} OBJECT ${CAUSAL_FUZZ_${part}})
  target_include_directories(causal_fuzz_${part} PRIVATE ${src})
  target_compile_options(causal_fuzz_${part} PRIVATE ${CAUSAL_FUZZ_COMPILE})
  target_link_libraries(causal_fuzz_${part} PRIVATE nlohmann_json::nlohmann_json spdlog::spdlog)
endforeach()
target_link_libraries(causal_fuzz_data PRIVATE PkgConfig::SENTENCEPIECE PkgConfig::PCRE2 ZLIB::ZLIB)

# The harnesses: NAME -> the parts it links. A new parser adds its line here and its seed folder under
# tests/fuzz/corpus/NAME/. The list stays on one line: tools/fuzz reads it with sed.
set(CAUSAL_FUZZ_HARNESSES config overrides token_file safetensors checkpoint sentencepiece token_import sweep gguf hf gguf_quants jsonl benchmark_file)
set(CAUSAL_FUZZ_PARTS_config core config)
set(CAUSAL_FUZZ_PARTS_overrides core config)
set(CAUSAL_FUZZ_PARTS_token_file core config io data)
set(CAUSAL_FUZZ_PARTS_safetensors core io)
set(CAUSAL_FUZZ_PARTS_checkpoint core io checkpoint)
set(CAUSAL_FUZZ_PARTS_sentencepiece core config io data)
set(CAUSAL_FUZZ_PARTS_token_import core config io data)
set(CAUSAL_FUZZ_PARTS_sweep core config io data sweep)
set(CAUSAL_FUZZ_PARTS_gguf core config io data interop)
set(CAUSAL_FUZZ_PARTS_hf core config io data interop)
set(CAUSAL_FUZZ_PARTS_gguf_quants core io)
set(CAUSAL_FUZZ_PARTS_jsonl core config io data)
set(CAUSAL_FUZZ_PARTS_benchmark_file core config io data)

enable_testing()
foreach(name ${CAUSAL_FUZZ_HARNESSES})
  set(objects)
  set(needs_sentencepiece FALSE)
  foreach(part ${CAUSAL_FUZZ_PARTS_${name}})
    list(APPEND objects $<TARGET_OBJECTS:causal_fuzz_${part}>)
    if(part STREQUAL "data")
      set(needs_sentencepiece TRUE)
    endif()
  endforeach()
  add_executable(fuzz_${name} ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_${name}.cpp ${objects})
  target_include_directories(fuzz_${name} PRIVATE ${src} ${CMAKE_SOURCE_DIR}/tests/fuzz)
  target_compile_options(fuzz_${name} PRIVATE ${CAUSAL_FUZZ_COMPILE})
  target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_${name} PRIVATE nlohmann_json::nlohmann_json spdlog::spdlog OpenSSL::Crypto)
  if(needs_sentencepiece)
    target_link_libraries(fuzz_${name} PRIVATE PkgConfig::SENTENCEPIECE PkgConfig::PCRE2 ZLIB::ZLIB)
  endif()
  # The replay: every committed input once (seeds and the crash inputs of fixed findings), label fuzz.
  add_test(NAME fuzz-replay:${name}
    COMMAND fuzz_${name} -runs=0 -rss_limit_mb=2048 -malloc_limit_mb=1024
      ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${name})
  set_tests_properties(fuzz-replay:${name} PROPERTIES LABELS fuzz TIMEOUT 300
    ENVIRONMENT "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endforeach()
