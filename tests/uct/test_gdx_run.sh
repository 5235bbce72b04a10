#!/usr/bin/env bash
# tools/gdx-run builds the environment and the mpirun command line it documents.
#   test_gdx_run.sh GDX_RUN MODULE
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2"
out=$(env -u UCX_TLS -u UCX_MEMTYPE_CACHE "$gdx_run" --module "$module" --tls gdx_shm --print ucx_info -v)
preload=$(preload_of "$module")
[ "${preload%%:*}" = "$module" ] || [ "${preload#*:}" = "$module" ] || fail "preload list '$preload' lacks $module"
for want in "LD_PRELOAD=$preload" "UCX_MEMTYPE_CACHE=n" "ucx_info -v"; do
  grep -qF -- "$want" <<<"$out" || fail "gdx-run --print lacks '$want': $out"
done
grep -qE "UCX_TLS=gdx_shm(,gdx_copy)?,self,gdx_aux:aux" <<<"$out" || fail "gdx-run --print: UCX_TLS not as documented: $out"
out=$(env -u UCX_TLS GDX_LOG_LEVEL=info "$gdx_run" --module "$module" --tls gdx_tcp --aux gdx_aux --print \
      mpirun -np 2 ./app)
for want in "--mca pml ucx" "--mca pml_ucx_tls gdx_tcp,self" "--mca pml_ucx_devices any" "--mca osc ucx" \
            "-x LD_PRELOAD=$preload" "-x GDX_LOG_LEVEL" "-np 2 ./app"; do
  grep -qF -- "$want" <<<"$out" || fail "gdx-run --print mpirun lacks '$want': $out"
done
grep -qE -- "-x UCX_TLS=gdx_tcp(,gdx_copy)?,self,gdx_aux:aux" <<<"$out" || fail "gdx-run --print mpirun: UCX_TLS: $out"
grep -q "^LD_PRELOAD" <<<"$out" && fail "mpirun itself got LD_PRELOAD: $out"
# the module's own ucx_info listing picks the default transports
out=$(env -u UCX_TLS "$gdx_run" --module "$module" --print true)
grep -q "UCX_TLS=gdx_" <<<"$out" || fail "no gdx transport chosen by default: $out"
"$gdx_run" --module /nonexistent true 2>/dev/null && fail "a missing module was accepted"
echo "PASS"
