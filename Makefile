# remat - one GNU Makefile. Objects go to build/ (build/san/ for sanitizer builds).
#   make            library build/libremat.a, build/libremat.so and the CLI build/remat
#   make test       set up, build and run the test suite
#   make san        the suite under AddressSanitizer and UBSan
#   make bench      the benchmarks (bench/), tables into docs/benchmarks.md
#   make run        set up and run the main job (the planner comparison table)
#   make fuzz       the readers' libFuzzer targets, FUZZ_SECONDS in all (default 60)
#   make install    PREFIX=/usr/local: library, header, remat, pkg-config file
#   make test-cuda  the CUDA backend's tests (CUDA=1 build in build/cuda; skipped without
#                   a GPU)
#   WERROR=1        warnings are errors (CI)
#   OUT=dir         build into dir instead of build/
# Targets that need the Debian packages run tools/setup.sh first and then a sub-make that
# parses this file afresh, so that what setup installed (onnx.proto) is seen on the first
# invocation on a bare machine.
#   CUDA=1          also build the cuda backend (nvcc, cuDNN 9, cuBLAS under CUDA_HOME)

PREFIX ?= /usr/local
CC ?= cc
ifeq ($(origin CC),default)
CC = gcc
endif

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith \
        -Wcast-qual -Wwrite-strings -Wundef -Wformat=2 -Wvla -Wnull-dereference \
        -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN += -Werror
endif
CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -D_GNU_SOURCE -fPIC $(WARN) -Iinclude -Isrc -MMD -MP
# COIN-OR's CBC (with Clp) solves the optimal strategy's MILP
CBC_LIBS := $(shell pkg-config --libs cbc 2>/dev/null || echo -lCbcSolver -lCbc -lClp -lCoinUtils)
LDLIBS := $(CBC_LIBS) -ldnnl -lprotobuf-c -lgomp -lm -lpthread

OUT ?= build
BUILD := $(OUT)
ifeq ($(SAN),1)
BUILD := $(OUT)/san
CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif

# CUDA=1: the cuda backend (src/exec/backend_cuda.c, src/kernels/cuda/*.cu), in build/cuda
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
ifeq ($(CUDA),1)
BUILD := $(BUILD)/cuda
CFLAGS += -DREMAT_CUDA -isystem $(CUDA_HOME)/include
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublas -lcudart -lstdc++
endif

LIB_SRC := $(sort $(wildcard src/core/*.c src/graph/*.c src/models/*.c src/io/*.c \
                             src/sched/*.c src/plan/*.c src/sim/*.c src/mem/*.c src/exec/*.c \
                             src/kernels/ref/*.c src/kernels/cpu/*.c))
LIB_SRC := $(filter-out src/exec/backend_cuda.c,$(LIB_SRC))
ifeq ($(CUDA),1)
LIB_SRC += src/exec/backend_cuda.c $(sort $(wildcard src/kernels/cuda/*.c))
endif
CLI_SRC := $(sort $(wildcard src/cli/*.c)) src/dist/mpi.c
TEST_SRC := $(sort $(wildcard tests/test_*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
ifeq ($(CUDA),1)
LIB_OBJ += $(patsubst %.cu,$(BUILD)/%.o,$(wildcard src/kernels/cuda/*.cu))
endif
# The ONNX reader's C code, generated at build time by protoc-c from the onnx.proto that
# Debian's python3-onnx ships.
ONNX_PROTO_DIRS ?= /usr/lib/python3/dist-packages/onnx /usr/include/onnx
ONNX_PROTO ?= $(firstword $(wildcard $(addsuffix /onnx.proto,$(ONNX_PROTO_DIRS))) \
                          onnx.proto-not-found)
GEN := $(BUILD)/gen
LIB_OBJ += $(GEN)/onnx.pb-c.o
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

all: $(BUILD)/libremat.a $(BUILD)/libremat.so $(BUILD)/remat

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu src/kernels/cuda/cuda_kernels.h src/kernels/cuda/grid.cuh
	@mkdir -p $(@D)
	$(NVCC) -std=c++17 -O2 $(CUDA_ARCH) -Xcompiler -fPIC -Iinclude -Isrc -c $< -o $@

onnx.proto-not-found:
	@echo "onnx.proto not found in $(ONNX_PROTO_DIRS): run tools/setup.sh (package python3-onnx)" >&2
	@exit 1

$(GEN)/onnx.pb-c.c $(GEN)/onnx.pb-c.h: $(ONNX_PROTO)
	@mkdir -p $(GEN)
	cp $< $(GEN)/onnx.proto
	cd $(GEN) && protoc-c --c_out=. onnx.proto

$(GEN)/onnx.pb-c.o: $(GEN)/onnx.pb-c.c
	$(CC) $(filter-out $(WARN),$(CFLAGS)) -w -I$(GEN) -c $< -o $@

$(BUILD)/src/io/onnx.o $(BUILD)/src/io/onnx_ops.o $(BUILD)/src/io/onnx_rnn_src.o: CFLAGS += -I$(GEN)
$(BUILD)/src/io/onnx.o $(BUILD)/src/io/onnx_ops.o $(BUILD)/src/io/onnx_rnn_src.o: | $(GEN)/onnx.pb-c.h

# the per-sample kernels' batch split (src/kernels/cpu/split.c) uses OpenMP pragmas
$(BUILD)/src/kernels/cpu/split.o: CFLAGS += -fopenmp
$(BUILD)/src/kernels/cpu/seq.o $(BUILD)/src/kernels/cpu/matmul.o $(BUILD)/src/kernels/cpu/ctx.o \
$(BUILD)/src/kernels/cpu/conv_gemm.o: CFLAGS += -fopenmp
# batch norm: channels on OpenMP's threads (src/kernels/ref/norm.c); the cross-entropy's
# rows and AdamW's elements too
$(BUILD)/src/kernels/ref/norm.o $(BUILD)/src/kernels/ref/loss.o $(BUILD)/src/exec/params.o: CFLAGS += -fopenmp
# kernels: -O3 vectorizes the elementwise loops; -fno-trapping-math lets it turn their
# selects into vector blends (it gives up floating-point exception flags, never values;
# no fast-math: the same bits as -O2)
$(BUILD)/src/kernels/%.o: CFLAGS += -O3 -fno-trapping-math

$(BUILD)/libremat.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libremat.so: $(LIB_OBJ)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

# MPI (docs/distributed.md): the remat command trains data parallel under mpirun when
# mpi.h is found (Open MPI's mpicc -showme, or pkg-config ompi-c); only src/dist/mpi.c
# includes it and only the command links it, never libremat. MPI=0 builds without.
ifneq ($(MPI),0)
MPI_CFLAGS := $(shell mpicc -showme:compile 2>/dev/null || pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS := $(shell mpicc -showme:link 2>/dev/null || pkg-config --libs ompi-c 2>/dev/null)
MPI_FOUND := $(shell printf '\043include <mpi.h>\n' | $(CC) $(MPI_CFLAGS) -E -x c - \
                 >/dev/null 2>&1 && echo 1)
endif
ifeq ($(MPI_FOUND),1)
$(BUILD)/src/dist/mpi.o: CFLAGS += -DREMAT_MPI $(patsubst -I%,-isystem %,$(MPI_CFLAGS))
$(BUILD)/remat: LDLIBS += $(MPI_LIBS)
endif

$(BUILD)/remat: $(CLI_OBJ) $(BUILD)/libremat.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/harness.h $(BUILD)/libremat.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests -I$(GEN) -o $@ $< $(BUILD)/libremat.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libremat.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libremat.a $(LDFLAGS) $(LDLIBS)

# The example that opens include/remat.h, extracted and built as a test program.
$(BUILD)/example.c: include/remat.h
	@mkdir -p $(@D)
	sed -n '/^ \* Example/,/^ \* Conventions/p' $< | sed -e '1,2d' -e '$$d' | \
	    sed -e 's/^ \*     //' -e 's/^ \*$$//' > $@

$(BUILD)/example: $(BUILD)/example.c $(BUILD)/libremat.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libremat.a $(LDFLAGS) $(LDLIBS)

SETUP ?= tools/setup.sh
setup:
	@$(SETUP)

# Setup first, then this Makefile parsed again for the target's real work (TARGET-now).
SETUP_FIRST := run test san bench fuzz test-cuda gen
$(SETUP_FIRST): setup
	@$(MAKE) --no-print-directory $@-now

# The ONNX reader's generated code alone (the suite checks setup-first with it).
gen-now: $(GEN)/onnx.pb-c.h

# The readers' libFuzzer targets (clang): tests/fuzz_onnx.c (ONNX), fuzz_dump.c (graph
# dumps), fuzz_data.c (data files), fuzz_params.c (parameter files) and fuzz_tokens.c
# (token data), each linked
# against the whole library built instrumented in $(OUT)/fuzz. `make fuzz FUZZ_SECONDS=N`
# runs them one after another from the project's seeds (tools/run_fuzz.sh), N seconds in
# all (default 60, an equal share each); a finding fails the target.
FUZZ_TARGETS := onnx dump data params tokens
FUZZ_SRC := $(filter-out src/exec/backend_cuda.c src/kernels/cuda/%,$(LIB_SRC))
FUZZ_OBJ := $(FUZZ_SRC:%.c=$(OUT)/fuzz/%.o) $(OUT)/fuzz/gen/onnx.pb-c.o
FUZZ_BIN := $(FUZZ_TARGETS:%=$(OUT)/fuzz/fuzz_%)
FUZZ_CFLAGS := -O1 -g -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I$(OUT)/gen \
               -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
               -fno-omit-frame-pointer
FUZZ_LIBS := $(CBC_LIBS) -ldnnl -lprotobuf-c -lgomp -lm -lpthread
FUZZ_SECONDS ?= 60

$(OUT)/fuzz/%.o: %.c | $(OUT)/gen/onnx.pb-c.h
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -c $< -o $@

$(OUT)/fuzz/gen/onnx.pb-c.o: $(OUT)/gen/onnx.pb-c.c
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -w -c $< -o $@

$(OUT)/fuzz/libremat.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(OUT)/fuzz/fuzz_%: tests/fuzz_%.c $(OUT)/fuzz/libremat.a
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(OUT)/fuzz/libremat.a $(FUZZ_LIBS)

fuzz-now: $(FUZZ_BIN)
	@tools/run_fuzz.sh $(FUZZ_SECONDS) $(FUZZ_BIN)

# The suite: every test program, then the CLI tests; one summary line at the end.
check: all $(TEST_BIN) $(BUILD)/example
	@tools/run_tests.sh $(BUILD) $(TEST_BIN)

test-now: check

san-now:
	@$(MAKE) --no-print-directory SAN=1 check

# The cuda backend's tests: on a machine without a GPU they report skipped.
test-cuda-now:
	@$(MAKE) --no-print-directory CUDA=1 all $(OUT)/cuda/tests/test_cuda
	$(OUT)/cuda/tests/test_cuda

bench-now: all $(BENCH_BIN)
	@tools/run_bench.sh $(BUILD) $(BENCH_BIN)

# The paper's seven networks at its settings, every strategy at its minimum budget; then
# an HTML page per network (`remat report`, about 30 s for all) in $(BUILD)/report/, their
# absolute paths printed last.
run-now: all
	@for m in resnet50 resnet152 vgg19 densenet161 googlenet; do \
	    $(BUILD)/remat compare $$m --batch 32 --time-limit 20 || exit 1; echo; done
	$(BUILD)/remat compare unet --batch 8 --time-limit 20
	@echo
	$(BUILD)/remat compare pspnet --batch 1 --time-limit 20
	@mkdir -p $(BUILD)/report && echo && echo "HTML reports (open in a browser):"
	@for m in resnet50:32 resnet152:32 vgg19:32 densenet161:32 googlenet:32 unet:8 pspnet:1; do \
	    $(BUILD)/remat report $${m%:*} --batch $${m#*:} -o $(BUILD)/report/$${m%:*}.html \
	    || exit 1; done

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(BUILD)/libremat.a $(BUILD)/libremat.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/remat.h include/remat_io.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/remat $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(shell sed -n 's/#define REMAT_VERSION "\(.*\)"/\1/p' include/remat.h)|' \
	    remat.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/remat.pc

clean:
	rm -rf build

.PHONY: all setup check install clean fixtures onnx.proto-not-found $(SETUP_FIRST) \
        $(SETUP_FIRST:%=%-now)
.SECONDARY:

-include $(shell find $(OUT) -name '*.d' 2>/dev/null)

# Regenerates tests/data, the PyTorch reference data of tests/test_fixtures_ops.c and tests/test_fixtures_models.c (needs torch).
fixtures:
	/usr/bin/python3 tools/make_fixtures.py
	/usr/bin/python3 tools/make_onnx_seed.py
	/usr/bin/python3 tools/make_adamw_fixture.py
	/usr/bin/python3 tools/make_tf_fixture.py
