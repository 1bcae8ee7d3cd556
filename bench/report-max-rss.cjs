// Preloaded into a benchmarked process (node --require): on exit, writes its peak RSS in bytes and the CPU
// time it used (user + system, in microseconds) to $NFDCTL_BENCH_RSS_FILE as "<rss> <cpu>", so a benchmark
// measures the real CLI process without external tools.
const {writeFileSync} = require('node:fs')

process.on('exit', () => {
  const usage = process.resourceUsage()
  if (process.env.NFDCTL_BENCH_RSS_FILE) writeFileSync(process.env.NFDCTL_BENCH_RSS_FILE, `${usage.maxRSS * 1024} ${usage.userCPUTime + usage.systemCPUTime}`)
})
