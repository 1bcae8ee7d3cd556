// oclif's runner, for bin/run.js: an entry point of the pack-time bundle (scripts/bundle.mjs), so the runner
// and the commands share one copy of @oclif/core.
export {execute} from '@oclif/core/execute'
