// Preloaded into a benchmarked process (node --require): on exit, writes its peak RSS in bytes to
// $NFDCTL_BENCH_RSS_FILE, so a benchmark measures the real CLI process without external tools.
const {writeFileSync} = require('node:fs')

process.on('exit', () => {
  if (process.env.NFDCTL_BENCH_RSS_FILE) writeFileSync(process.env.NFDCTL_BENCH_RSS_FILE, String(process.resourceUsage().maxRSS * 1024))
})
