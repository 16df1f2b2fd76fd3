# tests/slurm.sh: a single-node Slurm for the tests on this one host; source
# it after lib.sh, then call slurm_up.  It starts munged (its own socket and
# key) and slurmctld and slurmd on 127.0.0.1 (free ports, a generated
# slurm.conf, everything under $TMP/slurm), waits until the node is idle,
# and exports SLURM_CONF; an EXIT trap stops the daemons and removes $TMP.
# It skips the whole test file, saying why, when the programs are missing
# (pipelines/deps.sh installs slurm-wlm and munge), when not root, or when
# the daemons do not start.
SLURM_START_WAIT=30  # seconds for the daemons to come up
skip() { echo "1..0 # SKIP $*"; exit 0; }
S=$TMP/slurm
_slurm_pids=()
slurm_stop() {
	for p in "${_slurm_pids[@]}"; do kill "$p" 2> /dev/null; done
	for p in "${_slurm_pids[@]}"; do wait "$p" 2> /dev/null; done
	[ -S "$S/munge.sock" ] && munged -S "$S/munge.sock" --stop > /dev/null 2>&1
	rm -rf "$TMP"
}
_free_port() {
	perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1")->sockport, "\n"'
}
slurm_up() { # slurm_up [CPUS]: the node has CPUS CPUs (default 4)
	local cpus=${1:-4}
	for p in munged mungekey slurmctld slurmd sbatch srun sinfo; do
		command -v $p > /dev/null || skip "$p is not installed (pipelines/deps.sh installs slurm-wlm and munge)"
	done
	[ "$(id -u)" = 0 ] || skip "the test runs slurmd, which needs root"
	mkdir -p "$S/state" "$S/spool"
	trap slurm_stop EXIT
	mungekey -c -k "$S/munge.key" || skip "mungekey cannot make a key"
	munged --force -S "$S/munge.sock" --key-file="$S/munge.key" --log-file="$S/munged.log" \
		--pid-file="$S/munged.pid" --seed-file="$S/munged.seed" 2> "$S/munged.err" ||
		skip "munged does not start: $(head -c 300 "$S/munged.err")"
	cat > "$S/slurm.conf" <<EOF2
ClusterName=lmpipetest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(_free_port)
SlurmdPort=$(_free_port)
AuthType=auth/munge
AuthInfo=socket=$S/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF2
	export SLURM_CONF=$S/slurm.conf
	slurmctld -D -i > "$S/slurmctld.out" 2>&1 &
	_slurm_pids+=($!)
	slurmd -D -N localhost > "$S/slurmd.out" 2>&1 &
	_slurm_pids+=($!)
	local up=0
	for _ in $(seq 1 $((SLURM_START_WAIT * 4))); do
		if sinfo -h -o %t 2> /dev/null | grep -qx idle; then up=1; break; fi
		sleep 0.25
	done
	[ $up = 1 ] || skip "the Slurm daemons did not come up in ${SLURM_START_WAIT} s: $(tail -n 3 "$S"/*.out "$S"/*.log 2> /dev/null | tr '\n' ' ' | head -c 400)"
}
