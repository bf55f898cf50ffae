/**
 * Every code an {@link EvolveError} can carry (what `error[CODE]` prints and `--json` consumers match on), with the
 * exit status it gives by default and one line on what it means for a user. Codes are a stable contract: a code is
 * never renamed once shipped, and everything that raises one goes through {@link ErrorCode}, so a misspelt code is
 * a compile error rather than a code no script knows.
 *
 * Exit policy (README "Conventions for every command"): 1 = the command ran and found problems (the task, the
 * trial or the data in question is at fault), 2 = usage or environment error (the command line, the machine, the
 * engine or the store). A code whose cause can be either names the other case in `otherExit`; its call sites pass
 * that exit explicitly, and only those do.
 */

/** What the registry knows of one error code. */
export interface ErrorCodeInfo {
  /** The exit status an error with this code gives unless its call site passes another. */
  exit: 1 | 2;
  /** One line for people: what went wrong. */
  summary: string;
  /** Why some call sites give the other exit status; present only on codes that take both. */
  otherExit?: string;
}

const ran = (summary: string, otherExit?: string): ErrorCodeInfo => ({ exit: 1, summary, ...(otherExit ? { otherExit } : {}) });
const env = (summary: string, otherExit?: string): ErrorCodeInfo => ({ exit: 2, summary, ...(otherExit ? { otherExit } : {}) });

/** Every EvolveError code. */
export const ERROR_CODES = {
  // The command line and the CLI itself
  usage: env("the command line is wrong: a missing or malformed argument, or a flag out of range"),
  internal: env("an unexpected failure inside evolve (a bug); EVOLVE_DEBUG=1 prints the stack"),
  run_config_invalid: env("a run config file (`run -c`) cannot be read, is not TOML, or gives a flag a value of the wrong type"),
  run_config_key_unknown: env("a run config file (`run -c`) holds a key that is no flag of the command"),
  confirmation_required: env("the command destroys something and asks first, but there is no terminal to ask on; pass --yes"),
  ve_key_unsupported: env("--ve names a verifier setting other than the few a run may override"),
  config_invalid: env("$EVOLVE_HOME/config.toml is not valid TOML or does not match its schema"),
  disk_full: env("the disk (or a quota) holding a file evolve must write is full; what was stored before is intact"),

  // The store
  store_unavailable: env("the store under EVOLVE_HOME cannot be opened"),
  store_read_only: env("the store is on a read-only file system and the command would write (or must record a reader)"),
  store_corrupt: env("a store record, or the store's schema version, cannot be read; restore a backup"),
  store_too_new: env("the store was written by a newer evolve"),
  store_busy: env("task files kept changing while they were being stored; retry"),
  store_record_invalid: env("evolve refused to write a record that does not match the store's schema"),
  backup_failed: env("`evolve store backup` could not write its file"),

  // The container engine and the host
  engine_not_found: env("neither podman nor docker is on PATH"),
  environment_unsupported: env("`--env` names one of Harbor's cloud environments (daytona, modal, e2b, …): evolve runs local podman or docker only"),
  engine_unknown: env("--engine or EVOLVE_ENGINE names an engine other than podman or docker"),
  engine_unavailable: env("the container engine's socket does not answer (or is not a local unix socket)"),
  engine_error: env("the container engine refused a request"),
  engine_timeout: env("the container engine did not answer a request in time"),
  engine_aborted: env("a request to the container engine was aborted"),
  box_userns_failed: env("what the engine made in a user-namespaced box (a missing WORKDIR or working_dir) could not be given to the box's mapped root: evolve must run as root beside rootful podman"),
  host_guard_unavailable: env("the firewall rules that keep boxes off this host's services and private ranges cannot be installed"),
  image_missing: ran("the task's image is not present locally (no registry may be reachable)"),
  build_failed: ran(
    "the task's image did not build",
    "exit 2 when the engine's build command itself cannot be started: the machine is at fault, not the Dockerfile",
  ),
  build_timeout: ran("the task's image took longer than its build_timeout_sec to build"),

  // Tasks
  task_invalid: ran("task.toml is missing, not valid TOML, or does not match the task schema"),
  task_unreadable: env("a task directory or one of its files cannot be read"),
  task_symlink: ran("a task (or a dataset's task folder) is a symbolic link; tasks are stored as plain files"),
  task_special_file: ran("a task holds a FIFO, socket or device file"),
  task_changed: env("a task's files changed while it was being published; retry once nothing writes to it"),
  task_missing: env("the task a trial ran is no longer in the store"),
  task_init_exists: env("`task init` was given a directory that exists and is not empty"),
  task_init_steps_invalid: env("`task init --steps` is not a whole number from 1 to 50"),
  task_name_invalid: env("`task init --name` is not `org/name`"),

  // Datasets
  dataset_invalid: ran("some of a dataset's tasks have error findings; nothing was published"),
  dataset_dir_invalid: env("the dataset path is not a readable directory"),
  dataset_empty: env("the dataset folder holds no task directories"),
  dataset_name_invalid: env("a dataset name has characters outside lowercase letters, digits and . _ / -"),
  dataset_version_invalid: env("a dataset version is empty or holds spaces or @"),
  dataset_not_found: env("no dataset by that name (and version) is stored"),
  dataset_task_unknown: env("a dataset evaluator was asked to run a task its dataset does not hold"),
  dataset_task_duplicate: ran("two of a dataset's tasks have the same name"),
  dataset_version_exists: ran("that dataset version is already published with different content"),
  dataset_version_deleted: ran("that dataset version was deleted, and a deleted version is never reused with other content"),

  // Ids (engine/store/resolve.ts)
  id_ambiguous: env("the id prefix (or trial id suffix) names more than one job or trial; type more of it"),

  // Jobs
  job_not_found: env("no job by that id is stored"),
  agent_unknown: env("-a names an agent evolve does not know"),
  agent_model_invalid: env("-m is missing or not provider/model for an agent that calls a model"),
  agent_model_unsupported: env("the agent speaks none of the APIs of the -m model's provider"),
  agent_option_unknown: env("--ak names an option the agent does not take"),
  agent_option_invalid: env("--ak is not KEY=VALUE, or its value is not one the option allows"),
  agent_root_invalid: env("--agent-root (agent_root in a run config) is not a directory a trial can be given: missing, a link, or holding a link, a special or an unreadable file"),
  trajectory_seed_invalid: ran("a task's trajectory.json cannot seed the agent's session: it is not JSON or not an ATIF trajectory"),
  job_empty: env("the job selects no tasks"),
  job_too_large: env("the job would hold more trials than [jobs] max_trials allows"),
  job_busy: env("another live process is running the job"),
  job_cancelled: env("the job was cancelled and cannot be resumed"),
  job_settled: env("the job has completed; a finished job is not rewritten"),
  secret_not_attached: env("a secret the run needs is not set in this environment"),

  // Executors and workers (engine/executor): `run --executor slurm`, `evolve worker`
  executor_invalid: env("an executor option is wrong: an unknown --executor, a --slurm-arg not KEY=VALUE"),
  executor_unavailable: env("the executor's cluster could not be reached: sbatch missing or refusing the submission"),
  kubeconfig_invalid: env("--executor kubernetes: the kubeconfig is missing, not YAML, or its current context lacks a server or credentials evolve can use"),
  kubernetes_forbidden: env("--executor kubernetes: the API server refused the kubeconfig's user (401/403): its RBAC does not allow jobs, secrets or pods there"),
  kubernetes_conflict: env("--executor kubernetes: an object of the submission's name exists already in the namespace (409 AlreadyExists)"),
  kubernetes_invalid: env("--executor kubernetes: the API server found a manifest invalid (422), e.g. a malformed image or namespace"),
  coordinator_unreachable: env("a worker could not reach its job's coordinator (the `evolve run` process serving the leases)"),
  bundle_invalid: env("a folder sent between a worker and its coordinator was malformed"),
  // Trials
  trial_not_found: env("no trial by that id is stored"),
  trial_not_settled: env("the trial is still running; only a settled trial can be retried"),
  trial_not_live: ran("the trial has no running box (it settled, or has not booted yet)"),
  stream_not_recorded: ran("the trial recorded no such log stream"),
  step_unknown: env("`trial logs --step` names a step the trial did not run (the message lists those it did), or the trial has no steps"),
  stream_refused: ran("a log stream's file is not a regular file the box wrote (a link, a FIFO, a device) and is not read"),
  // The parsed trace and the trial's artifacts (engine/trace/store.ts, commands/trace.ts)
  trace_not_recorded: ran("the trial stored no parsed trace (its agent has no trace parser, or it never ran)"),
  trace_kind_unknown: env("--type names an event kind the parsed trace does not have"),
  parser_unknown: env("`trace convert --harness` names a harness that has no trace parser"),
  trace_input_unreadable: env("a file given to `trace convert` is missing, not a regular file, or cannot be read"),
  artifact_not_recorded: ran("the trial stored no such artifact (`trial download --stream`): absent, never printed empty"),
  // Results out: job folders, downloads and exports (engine/results)
  download_target_exists: env("the folder or file a download or export would write already exists and is not empty; pass --overwrite to replace it"),
  results_target_refused: env("a path inside the folder a job folder, download or export writes is a symbolic link or not a folder: it is never followed, nothing is written through it"),
  job_folder_taken: env("the job folder's name under the jobs dir is held by another job's folder (its config.json names another job), or by files that are not a job folder"),
  upload_too_large: env("an upload is over the archive ceiling (limits.uploads.job_archive_bytes): the .tar.gz, the bytes it unpacks to (a tar bomb), its entry count, or a job.log over the one-file limit"),
  upload_invalid: ran("what `upload` was given is no job folder: config.json and result.json at its root are required"),
  upload_unreadable: env("the folder or .tar.gz `upload` was given cannot be read (missing, a link, a special file, not gzip or tar)"),
  invalid_trial: ran("a trial's result.json in an upload cannot be read or lacks one of its seven required keys: the import fails, nothing lands"),
  trial_too_large: ran("a trial of an upload holds a file over 5 GiB or a trajectory too large to parse: that trial is skipped, the rest lands"),
  job_already_uploaded: ran("the same job (the id its result.json states) was uploaded already"),
  job_uploaded: ran("the job was uploaded from elsewhere: resume, retry and regrade refuse it (analyze works)"),
  import_not_found: env("no import by that id (see `evolve job imports`)"),
  import_interrupted: ran("the process running an import is gone: the import will not finish; upload again"),
  regrade_never_verified: ran("the trial never reached its verifier: there is nothing to regrade"),
  regrade_judge_task: ran("the trial's task grades with an LLM judge, which a regrade would ask again"),
  regrade_verifier_changed: ran("the agent changed what the shared verifier runs; a regrade would restore those changes"),
  regrade_multi_step: ran("the trial's task has several steps, and only the last step's box is kept"),
  regrade_no_kept_files: ran("the trial kept no files for a verifier to see again"),
  regrade_files_incomplete: ran("the trial could not keep every changed path, so its verifier would see a different box"),

  // OpenTelemetry export (engine/otel): `trace export`, `run --otlp`
  otlp_target_not_found: env("`trace export` names neither a trial nor a job (by id, unique start or end, or job name)"),
  otlp_trial_not_settled: env("`trace export` names a trial that is still running; its trace is exported once it settles (or use `run --otlp`)"),
  otlp_destination_invalid: env("--otlp is neither a file path nor an http(s) URL with a host"),
  otlp_header_invalid: env("--header is not NAME=VALUE with an HTTP header name and a one-line value"),
  otlp_unreachable: env("the OTLP endpoint did not answer: refused, unknown host, or no answer within the time limit"),
  otlp_rejected: env("the OTLP endpoint answered with a status other than 2xx (bad credentials, JSON to a protobuf-only endpoint, …)"),
  otlp_write_failed: env("the --otlp file cannot be written"),

  // A trial's files
  path_outside_tree: env("a path given for a box's files climbs out of the box's file tree"),
  files_unavailable: ran("the trial has no files to read (no live box and no kept tree)"),
  file_not_found: ran("the path does not exist in the live box"),
  file_not_kept: ran("the path was not kept from the run (unchanged, left out, or over a cap)"),
  file_deleted: ran("the run deleted the path"),
  not_a_file: ran("the path is a folder, a link or a special file, not a regular file"),
  file_too_large: ran("the file is over the size limit of `trial files cat`"),
  kept_file_unreadable: ran("the kept copy of a file is missing or changed since the trial"),
  box_read_failed: ran("listing a folder in the live box failed"),
  archive_too_large: ran("the live box's tar is over the --max-bytes limit of `trial files archive`"),

  // Vendored and registered agents (engine/harness/vendor.ts, manifest.ts)
  agent_not_vendored: env("the agent is not vendored on this host and the npm registry cannot be reached to vendor it"),
  agent_pull_failed: env("npm could not install the agent's packages (a version the registry lacks, or a changed layout)"),
  npm_not_found: env("npm is not on PATH, and evolve vendors agents with it"),
  agent_archive_unreadable: env("`agent import` names no regular file: missing, a folder, a FIFO, a socket or a device"),
  agent_archive_invalid: ran("an `agent import` file is not a tar of vendored agents, or holds a link out, an absolute or climbing path, or too much"),
  agent_tampered: ran("a vendored agent's files differ from its manifest (changed, missing or extra files)"),
  agent_manifest_invalid: ran("an `agent register` manifest is not TOML or does not match the manifest schema"),
  agent_name_reserved: env("the name is a built-in agent's and cannot be registered"),

  // Portable packs for air-gapped machines (engine/pack)
  pack_unreadable: env("`evolve unpack` names no regular file: missing, a folder, a FIFO, a socket or a device"),
  pack_corrupt: ran("a pack is not a readable .evolvepack: no manifest first, a malformed manifest, a member missing or one the manifest does not list"),
  pack_digest_mismatch: ran("a pack member (or a task, the dataset or an image it carries) differs from the sha256 digest its manifest records"),
  pack_member_refused: ran("a pack holds a hostile member: an absolute or climbing path, a link, a device or other special file, or a name twice"),
  pack_too_large: ran("a pack holds more bytes or members than unpack allows (or than its manifest declares): a tar or gzip bomb"),
  pack_image_failed: env("the container engine could not save or load a pack's images"),

  // Trajectories (ATIF)
  trajectory_unreadable: env("the trajectory file cannot be read as JSON: missing, not a regular file, over the size limit, or not JSON"),

  // Harness evolution (engine/evolve)
  episodes_unreadable: ran("the episodic memory file (.agent/memory/episodes.jsonl) is a link, a FIFO, a device or cannot be read"),
  agent_dir_missing: env("the .agent/ folder a command reads (the project's live harness, or the conductor's --agent-root) does not exist or is not a folder"),
  agent_dir_unsafe: ran("an agent folder (.agent/ or a candidate's files/) holds a link, a FIFO, a socket or a device; only plain files and folders are copied"),
  agent_dir_too_large: ran("an agent folder (.agent/ or a candidate's files/) holds more files or bytes than evolve copies"),
  candidate_where_invalid: env("a candidate's where is not one of prompt, knowledge, runtime, config"),
  candidate_field_empty: env("a candidate needs a non-empty pathology and hypothesis"),
  candidate_path_invalid: env("a candidate's file path is empty, absolute, climbs out of .agent/, or names memory/ (episodes stay with the live harness)"),
  candidate_unknown: env("no candidate by that id is in evolve/candidates (or the id is not a candidate id)"),
  candidate_invalid: ran("a candidate's descriptor.json is not JSON, does not match the descriptor's shape, or its lineage loops"),
  candidate_not_confirmed: ran("the candidate is confirmed in no round record, so install refuses it without --force"),
  sign_test_not_significant: ran("`harness install --require-sign-test`: the candidate's screen does not reach p < 0.05 under the exact sign test (fewer than 6 pairs, or too many ties or losses)"),
  holdout_not_held: ran("the candidate's gain did not hold on the holdout, so install refuses it without --override-holdout"),
  round_record_invalid: ran("a round record (evolve/rounds/<n>/round.json) cannot be read as a round"),
  install_nothing_to_undo: ran("no install is left to undo: every backup under evolve/backups has been restored"),
  genebank_entry_invalid: env("an entry offered to the gene bank does not match the gene bank's shape"),

  // The gateway
  gateway_config_invalid: env("the gateway's upstreams or prices file cannot be read"),
  model_upstream_missing: env("no upstream serves the model's provider, or it has no credential: a run would never meet its model"),
  model_unknown: env("the upstream lists its models (gateway.toml `models`) and the model asked for is not among them"),
  model_preflight_failed: env("--preflight-call: the one real call through the gateway got no answer from the model"),

  // Meta-Harness Adapter's proposal round (engine/metaharness/propose.ts, proposer.ts)
  propose_placeholder_unknown: env("the round prompt (PROPOSE.md) uses a {placeholder} that is none of {round}, {k}, {state_dir}, {scratch_dir}, {steps_dir}, {template_dir}"),
  proposer_arg_invalid: env("an extra proposer argument is not KEY=VALUE (an option of the proposer CLI's agent), or sets web_search, which the evolver's web_search parameter decides"),

  // The evolver's evals, screens and rounds (engine/eval/evals.ts, engine/evolve/screen.ts, round.ts)
  cards_on_host_required: env("the run needs the host: a command runner (runner.json \"agent\": \"command\") is a program on this machine and runs only with --on-host"),
  card_check_undecided: ran("in a card's box, the card's check could not decide (the conductor left no output, it is too large, or the check command timed out): the attempt is invalid"),
  card_invalid: ran("a task card (evolve/evals/*.json) is not JSON, is a link or too large, or a field is missing or malformed"),
  card_duplicate: ran("two task cards have the same id"),
  cards_none: env("the project's evolve/evals/ (or the --holdout folder) holds no task cards"),
  runner_invalid: env("evolve/runner.json is not JSON or does not say how a card runs (agent, model, command, timeout_sec)"),
  screen_no_candidates: env("there is no candidate to screen or round: none named, or every scaffolded one was screened already"),
  screen_mismatch: env("a screen or round being resumed was started with other candidates, sample or evals"),
  evolve_interrupted: env("the screen or round was interrupted; running it again resumes where it stopped"),
  attempts_model_unavailable: env("an eval, screen or round stopped because attempts never reached their model (no upstream, unreachable, auth failure or 5xx): nothing was scored or learned from them"),

  // The conductor and its .agent/ (engine/conductor)
  conductor_config_invalid: ran("the agent directory's harness/config.json is not JSON, has an unknown key, or a value of the wrong type"),
  seats_invalid: ran("harness/seats.json is not JSON, names an unknown seat, or a module (inside .agent/) or function that cannot be loaded"),
  tool_schema_invalid: ran("a file in protocols/tool_schemas/ is not a {name, description, input_schema} object for one of the conductor's tools"),
  seat_failed: ran("a seat function from harness/seats.json threw during the run"),
  conductor_prompt_unreadable: env("`conductor run --prompt-file` names no regular file (missing, a folder, a FIFO, a device) or one over 8 MiB"),
  conductor_endpoint_missing: env("`conductor run` has no gateway URL or key: give --base-url and --key-env, or set the provider's *_BASE_URL and key"),
  episode_write_failed: env("an episode cannot be appended to memory/episodes.jsonl (not writable, or a link)"),
  episode_read_failed: ran("memory/episodes.jsonl is a link or not a regular file"),
  agent_dir_exists: env("`harness init` was given a directory whose .agent/ exists and is not empty"),
  agent_dir_unwritable: env("`harness init` cannot write the .agent/ files"),

  // Meta-Harness Adapter search (engine/metaharness)
  metaharness_template_invalid: env("the template folder given holds no plain .hermit/ folder (manifest.json and EVOLVER.md)"),
  metaharness_seed_invalid: ran("the starting adapter fails check_spec, so the run cannot start from it"),
  metaharness_state_exists: env("the run folder already holds a Meta-Harness Adapter state; resume it or start in an empty folder"),
  metaharness_run_missing: env("the folder holds no Meta-Harness Adapter state (workspace/state/meta_harness_adapter.json)"),
  metaharness_state_unsafe: env("the run's state folder or state file is a symbolic link or not a plain folder or file; the evolver keeps its records only in real ones"),
  metaharness_state_invalid: env("workspace/state/meta_harness_adapter.json is not JSON or not a version-1 state"),
  metaharness_candidate_unknown: env("no candidate by that id is in the run's state, or it was never stored"),
  metaharness_candidate_tampered: ran("a stored candidate's folder holds a link or special file, or is gone; it is never handed back"),
  metaharness_nothing_to_hand_back: ran("no intact candidate is left to hand back or finalize: every one is invalid, tampered or unevaluated"),
  metaharness_config_invalid: env("the Meta-Harness Adapter run's config (run.toml or its flags) has a key that is missing, of the wrong type or out of range; the message names the key"),
  metaharness_run_mismatch: env("the run folder holds a state started with another search set or starting adapter; resume it with the same config, or start in a new folder"),
  metaharness_out_exists: env("`metaharness finalize --out` names a folder that exists and is not empty"),

  // `evolve serve` (the local API) and its tokens
  serve_token_missing: env("a request to `evolve serve` over TCP carried no `Authorization: Bearer <token>` header (HTTP 401)"),
  serve_token_refused: env("the API token is not one `evolve auth token create` made here, or it was revoked (HTTP 401)"),
  serve_scope_refused: env("a read-scoped API token asked for what only a run-scoped one may do, such as starting a job (HTTP 403)"),
  serve_public_without_token: env("`evolve serve --host` names an address other than loopback while no API token exists: create one first"),
  serve_route_unknown: env("no route of the local API has that method and path (HTTP 404)"),
  serve_socket_unsafe: env("the folder of `evolve serve --socket` is not this user's own mode-0700 folder, so other users could reach the socket"),
  path_refused: env("a path given to the local API climbs out (`..`, encoded or not), is absolute where it must be relative, or holds a NUL or an encoded slash (HTTP 400)"),
  evolve_project_missing: env("`evolve serve` was started without --project, so it serves no evolver records (HTTP 404)"),
  token_not_found: env("no API token by that id is stored (`evolve auth token list`)"),

  // teams on one machine (`evolve auth org`, `--org`)
  user_invalid: env("the local identity ($EVOLVE_USER, else the OS user name) is not a plain name evolve can record"),
  org_not_member: env("you are not a member of the organization named (or it does not exist: the two are answered alike), e.g. `run --org`"),
  org_not_owner: env("only an owner of the organization may do that (invite, manage members); you are a member"),
  org_exists: env("`evolve auth org create` names an organization that already exists on this machine"),
  invite_refused: env("the invite given to `evolve auth org join` is unknown, already used, revoked or expired (all answered alike)"),
  org_last_owner: env("the change would leave the organization without an owner (the last owner demoting themself, leaving or being removed): make another member an owner first"),
  org_member_missing: env("`evolve auth org members --make-owner|--demote|--remove` names a user who is not a member of the organization"),
  org_not_empty: env("`evolve auth org delete` refuses an organization that still holds jobs or datasets: delete them first"),
  invite_not_found: env("`evolve auth org invite --revoke` names no invite of an organization you belong to (unknown and another org's are answered alike)"),
} as const satisfies Record<string, ErrorCodeInfo>;

/** A code an EvolveError can carry. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** Whether `code` is a registered error code (for text that comes from outside, e.g. a README or a script). */
export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}
