"""Writes bench/timeline.patch and bench/timeline_classic.patch from the templates as they are:
the timing-only instrumentation that bench/timeline.py reads (%globaltimer readings written over
the weight scales at exit). Run it after a change to templates/native.cuh or classic.cuh:
tests/run checks that both patches still apply.

Usage: python3 bench/timeline_patches.py"""
import difflib, os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOW = 'auto now = [] { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; };'


class Source:
    def __init__(self, text):
        self.s = text

    def rep(self, old, new):
        """Replaces the one place old stands (an instrumentation point that moved is an error)."""
        n = self.s.count(old)
        if n != 1:
            raise SystemExit(f"timeline_patches.py: {n} places match:\n{old}")
        self.s = self.s.replace(old, new)

    def line_with(self, part):
        return next(l for l in self.s.split("\n") if part in l) + "\n"


def native(src):
    """16 points per CTA, in bench/timeline.py's POINTS order."""
    src.rep("""    extern __shared__ u8 dyn[];
""", f"""    extern __shared__ u8 dyn[];
    // bench/timeline.py: %globaltimer at 16 points (timing only; written over Bs at exit).
    __shared__ unsigned long long ev[16];
    {NOW}
    const unsigned long long t_entry = now();
    if (threadIdx.x == 0) {{
        for (int i = 0; i < 16; i++)
            ev[i] = 0;
        ev[0] = t_entry;
    }}
""")
    src.rep("""        mbar_fence_init();
""", """        mbar_fence_init();
        ev[1] = now();
""")
    src.rep("""    griddep_wait();

""", """    griddep_wait();
    if (threadIdx.x == NC * 128)
        ev[13] = t_entry, ev[2] = now();
    if (threadIdx.x == 0)
        ev[14] = now();

""")
    stage_line = src.line_with("int stage = early")
    src.rep("""            prefetch_tensor_map(&tmB);
""" + stage_line + """            for (int u = cluster; u < units; u += clusters) {
                int tm, tn;
                unit_tile(u, tm, tn);
""", """            prefetch_tensor_map(&tmB);
            ev[3] = now();
""" + stage_line + """            for (int u = cluster; u < units; u += clusters) {
                int tm, tn;
                unit_tile(u, tm, tn);
                if (ev[4] == 0)
                    ev[4] = now();
""")
    src.rep("""                    mbar_wait(empty0 + 8 * stage, phase ^ 1);
                    copy_tiles(stage, kb, tm, tn);
""", """                    mbar_wait(empty0 + 8 * stage, phase ^ 1);
                    if (ev[5] == 0)
                        ev[5] = now();
                    copy_tiles(stage, kb, tm, tn);
                    if (ev[6] == 0)
                        ev[6] = now();
""")
    src.rep("""            griddep_launch_dependents();
        } else""", """            ev[7] = now();
            griddep_launch_dependents();
        } else""")
    src.rep("""                    cp_async_arrive(full0 + 8 * stage);
""", """                    cp_async_arrive(full0 + 8 * stage);
                    if (lane == 0 && ev[15] == 0)
                        ev[15] = now();
""")
    src.rep("""            regs_alloc<CONSUMER_REGS>();
""", """            regs_alloc<CONSUMER_REGS>();
        if (threadIdx.x == 0)
            ev[8] = now();
""")
    src.rep("""                    wait_full(prev);
                    issue(part0, true);
                    advance();
                    for (int kb = 1;""", """                    wait_full(prev);
                    if (wg == 0 && tid == 0 && ev[9] == 0)
                        ev[9] = now();
                    issue(part0, true);
                    advance();
                    for (int kb = 1;""")
    src.rep("""                    for (int kb = 0; kb < nk; kb++) {
                        wait_full(prev);
""", """                    for (int kb = 0; kb < nk; kb++) {
                        wait_full(prev);
                        if (wg == 0 && tid == 0 && ev[9] == 0)
                            ev[9] = now();
""")
    src.rep("""                if (CHAIN && pending > 0)
                    take_offset();
""", """                if (CHAIN && pending > 0)
                    take_offset();
                if (wg == 0 && tid == 0)
                    ev[10] = now();
""")
    bulk_wait = src.line_with("bulk_wait(); // the slab must outlive")
    src.rep(bulk_wait, bulk_wait + """        if (wg == 0 && tid == 0)
            ev[11] = now();
""")
    src.rep("""    // No CTA may leave while""", """    __syncthreads();
    if (threadIdx.x == 0) {
        ev[12] = now();
        unsigned *out = (unsigned *)Bs + 16 * blockIdx.x;
        for (int i = 0; i < 16; i++)
            out[i] = (unsigned)ev[i];
    }
    // No CTA may leave while""")
    src.rep("""            copy_tiles(0, kb0, tm0, tn0);
""", """            copy_tiles(0, kb0, tm0, tn0), ev[6] = now();
""")


def classic(src):
    """7 points of thread 0, in bench/timeline.py's CLASSIC_POINTS order, then 9 zero words."""
    src.rep("""    test_plants();
    extern __shared__ u8 dyn[];
""", f"""    test_plants();
    // bench/timeline.py --family classic: %globaltimer at 7 points of thread 0 (timing only;
    // written over Bs at exit).
    {NOW}
    unsigned long long ev[7] = {{now(), 0, 0, 0, 0, 0, 0}};
    extern __shared__ u8 dyn[];
""")
    src.rep("""    const int ktiles = (K + BK - 1) / BK;
""", """    const int ktiles = (K + BK - 1) / BK;
    ev[1] = now();
""")
    src.rep("""            cp_async_commit();
        }
        for (int kt = 0; kt < ktiles; kt++) {
""", """            cp_async_commit();
        }
        ev[2] = now();
        for (int kt = 0; kt < ktiles; kt++) {
""")
    src.rep("""            __syncthreads();
            int next = kt + STAGES - 1;
""", """            __syncthreads();
            if (kt == 0)
                ev[3] = now();
            int next = kt + STAGES - 1;
""")
    src.rep("""    cp_async_wait<0>();
    if (!math.stores())
""", """    cp_async_wait<0>();
    ev[4] = now();
    if (!math.stores())
""")
    src.rep("""                                math.sum[f][j][2 * h], math.sum[f][j][2 * h + 1]);
}""", """                                math.sum[f][j][2 * h], math.sum[f][j][2 * h + 1]);
    ev[5] = now();
    if (threadIdx.x == 0) {
        ev[6] = now();
        unsigned *out = (unsigned *)Bs + 16 * blockIdx.x;
        for (int i = 0; i < 16; i++)
            out[i] = i < 7 ? (unsigned)ev[i] : 0u;
    }
}""")


def main():
    for template, instrument, patch in (("native.cuh", native, "timeline.patch"),
                                        ("classic.cuh", classic, "timeline_classic.patch")):
        rel = "templates/" + template
        with open(os.path.join(ROOT, rel)) as f:
            text = f.read()
        src = Source(text)
        instrument(src)
        diff = difflib.unified_diff(text.splitlines(True), src.s.splitlines(True), "a/" + rel, "b/" + rel)
        with open(os.path.join(ROOT, "bench", patch), "w") as f:
            f.writelines(diff)
        print("wrote bench/" + patch)


if __name__ == "__main__":
    main()
