# blocktune: `make` builds build/tune and the library; `make test` runs every CPU test twice,
# plainly and under AddressSanitizer + UndefinedBehaviorSanitizer; `make test-gpu` runs the GPU
# tests (they report themselves skipped where no driver is found).

CUDA_HOME ?= /usr/local/cuda
CC ?= cc
BUILD ?= build
SAN ?=

WARN := -std=c11 -Wall -Wextra -Werror -Wno-format-truncation
CFLAGS_BASE := $(WARN) -g -D_GNU_SOURCE -fPIC -iquote tuner -iquote templates -Iinclude \
               -isystem $(CUDA_HOME)/include
ifeq ($(SAN),1)
CFLAGS_OPT := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDFLAGS_SAN := -fsanitize=address,undefined
else
CFLAGS_OPT := -O2
LDFLAGS_SAN :=
endif
CFLAGS += $(CFLAGS_BASE) $(CFLAGS_OPT)

# (-Wno-format-truncation: paths go through bt_sprintf, which reports truncation itself.)
# NVRTC from the toolkit; cJSON shared (copied beside the binary, found through $ORIGIN);
# libyaml static so the binary runs where only libcjson.so.1 travels with it.
NVRTC_LIBS := -L$(CUDA_HOME)/lib64 -lnvrtc -Wl,-rpath,$(CUDA_HOME)/lib64
RPATH := -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/..'
YAML_STATIC := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libyaml.a /usr/lib/aarch64-linux-gnu/libyaml.a /usr/lib/libyaml.a /usr/local/lib/libyaml.a))
ifeq ($(YAML_STATIC),)
YAML_LIBS := -lyaml
else
YAML_LIBS := $(YAML_STATIC)
endif
CJSON_SO := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libcjson.so.1 /usr/lib/aarch64-linux-gnu/libcjson.so.1 /usr/lib/libcjson.so.1 /usr/local/lib/libcjson.so.1))
LIBS := $(NVRTC_LIBS) -lcjson -ldl -lpthread -lm

# The library (include/blocktune.h): families, configs, NVRTC, the driver, launches.
LIB_SRCS := $(wildcard tuner/util.c tuner/family.c tuner/configio.c tuner/jit.c tuner/cuda.c \
            tuner/gpu.c tuner/blocktune.c)
# The tuner on top of it.
TOOL_SRCS := $(wildcard tuner/cli.c tuner/searchspace.c tuner/shapes.c tuner/tune.c \
             tuner/worker.c tuner/bench.c tuner/journal.c tuner/progress.c tuner/fanout.c)
MAIN_SRC := tuner/main.c
TEST_SRCS := $(wildcard tests/*.c)
TEMPLATES := $(sort $(wildcard templates/*.cuh templates/*.h))

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/templates_embed.o
TOOL_OBJS := $(TOOL_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_OBJS := $(TEST_SRCS:%.c=$(BUILD)/obj/%.o)

.PHONY: all test test-gpu test-cpu clean asan valgrind
all: $(BUILD)/tune $(BUILD)/libblocktune.so $(BUILD)/libblocktune.a $(BUILD)/tests/unit

$(BUILD)/obj/%.o: %.c $(wildcard tuner/*.h include/*.h tests/*.h) $(BUILD)/gen/templates_embed.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/gen/templates_embed.o: $(BUILD)/gen/templates_embed.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-overlength-strings -c $< -o $@

# The kernel templates are compiled into the binary so the library needs no template path.
$(BUILD)/gen/templates_embed.c: $(TEMPLATES) tuner/embed.c
	@mkdir -p $(BUILD)/gen $(BUILD)/host
	$(CC) -std=c11 -Wall -Wextra -Werror -O1 tuner/embed.c -o $(BUILD)/host/embed
	$(BUILD)/host/embed $(TEMPLATES) > $@.tmp && mv $@.tmp $@

$(BUILD)/libcjson.so.1:
	@mkdir -p $(BUILD)
	@if [ -n "$(CJSON_SO)" ]; then cp -L $(CJSON_SO) $@; else echo "libcjson.so.1 not found: apt-get install libcjson-dev" >&2; exit 1; fi

$(BUILD)/libblocktune.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libblocktune.so: $(LIB_OBJS) $(BUILD)/libcjson.so.1 tuner/blocktune.map
	$(CC) -shared $(LDFLAGS_SAN) -Wl,--version-script=tuner/blocktune.map -o $@ $(LIB_OBJS) $(RPATH) $(LIBS)

$(BUILD)/tune: $(BUILD)/obj/$(MAIN_SRC:.c=.o) $(TOOL_OBJS) $(LIB_OBJS) $(BUILD)/libcjson.so.1
	$(CC) $(LDFLAGS_SAN) -o $@ $(BUILD)/obj/$(MAIN_SRC:.c=.o) $(TOOL_OBJS) $(LIB_OBJS) \
	    $(RPATH) $(YAML_LIBS) $(LIBS)

$(BUILD)/tests/unit: $(TEST_OBJS) $(TOOL_OBJS) $(LIB_OBJS) $(BUILD)/libcjson.so.1 $(BUILD)/tests/libfakecuda.so
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) -o $@ $(TEST_OBJS) $(TOOL_OBJS) $(LIB_OBJS) $(RPATH) $(YAML_LIBS) $(LIBS)

# A stand-in CUDA driver (BT_LIBCUDA) for tests of the GPU worker's paths on a machine without one.
$(BUILD)/tests/libfakecuda.so: tests/fakecuda/fakecuda.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O1 -fPIC -shared -isystem $(CUDA_HOME)/include $< -o $@

asan:
	$(MAKE) BUILD=build/asan SAN=1 build/asan/tune build/asan/tests/unit

# Both builds' tests; tests/run sums them into one final "N passed, N failed, N skipped" line.
test: all asan
	@tests/run $(BUILD) build/asan

test-cpu: all
	@tests/run $(BUILD)

test-gpu: all
	@BT_GPU_TESTS=1 tests/run $(BUILD)

# The CPU tests under valgrind: any error, or a block definitely or indirectly lost, fails (exit
# 9). NVRTC is slow under it: about 6 minutes on 2 cores, so it is not part of `make test`.
valgrind: all
	valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=9 \
	    $(BUILD)/tests/unit

clean:
	rm -rf build
