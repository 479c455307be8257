/**
 * CPU time from /proc (Linux), for the benches: per thread, which process.cpuUsage() cannot give on Node 20.
 */
import { readFileSync } from 'node:fs';

/** USER_HZ: the unit of utime/stime in /proc/PID/stat on Linux */
export const CLK_TCK = 100;

/** user + system ticks of one process or thread (a /proc/PID/stat or /proc/PID/task/TID/stat file) */
export function ticksOf(statFile: string): number {
  const stat = readFileSync(statFile, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of proc(5))
}

/** user + system CPU milliseconds of this process's main thread alone (its task id is the process id) */
export function mainThreadCpuMs(): number {
  return (ticksOf(`/proc/self/task/${process.pid}/stat`) * 1000) / CLK_TCK;
}
