/**
 * Cards run by the built-in conductor, in-process on the host, reaching its model through the cards gateway: the
 * trace goes to the attempt's log as JSON lines (`{type, data}`, as `evolve conductor run` prints it), so the
 * activation marker is looked for in what the model was actually sent (the prompt event carries the system prompt),
 * and each run's episode is appended to the overlay's memory, never the live one.
 */
import { episodeOf, appendEpisode } from "../conductor/episodes.ts";
import { runConductor } from "../conductor/loop.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { gatewayModelName, splitModel, wireApiOf } from "../providers.ts";
import type { ConductorCardRunner } from "./evals.ts";

/** The {@link ConductorCardRunner} of cardsEvaluator for `agent: "conductor"`. */
export const conductorCardRunner: ConductorCardRunner = async (o) => {
  const { provider, model } = splitModel(o.model)!;
  // the provider table decides the API and the gateway's name of the model, as it does for `conductor run`
  const endpoint = { api: wireApiOf(provider), baseUrl: o.gateway.url, key: o.gateway.key, model: gatewayModelName(provider, model) };
  let result;
  try {
    result = await runConductor({
      agentRoot: o.agentRoot,
      instruction: o.card.prompt,
      workdir: o.workdir,
      endpoint,
      timeoutMs: o.timeoutMs,
      signal: o.signal,
      // the model's shell commands run with the card's environment, never evolve's (no provider key in it)
      env: o.env,
      onTrace: (u) => o.log.write(JSON.stringify(u) + "\n"),
    });
  } catch (e) {
    // a candidate whose seats.json or config.json cannot be loaded never ran: its attempt is a launch failure
    if (e instanceof EvolveError) {
      o.log.write(`[evolve: the conductor did not start: error[${e.code}]: ${e.message}]\n`);
      return { output: "", outcome: "launch_failed", exitCode: null, timedOut: false, error: `the conductor did not start: ${e.code}: ${firstLine(e)}` };
    }
    throw e;
  }
  if (result.outcome === "aborted") o.signal?.throwIfAborted();
  // whether the model was ever reached is the cards evaluator's to say, from the gateway's record of the calls
  // (gateway/meter.ts), for this runner as for a command: it then neither scores the attempt nor records its episode.
  // The loop asks the same rule of what it was answered, so the two differ only when no call reached the gateway at
  // all: that attempt is no score either (invalid, no episode)
  if (result.model_unavailable) return { output: "", outcome: result.outcome, exitCode: 1, timedOut: false, error: `the conductor could not reach the gateway: ${result.error ?? "model_error"}` };
  const timedOut = result.outcome === "timeout";
  // the conductor ran to an end it chose (finished, max_turns, model_error): an exit code as `conductor run` gives it
  const exitCode = timedOut ? null : result.outcome === "finished" ? 0 : 1;
  return {
    output: result.output,
    outcome: result.outcome,
    exitCode,
    timedOut,
    // an episode is read by later runs and carried to the live memory: a key the run printed is not in it
    record: (score) => appendEpisode(o.agentRoot, JSON.parse(o.redact(JSON.stringify(episodeOf(result, { task: o.card.id, domain: o.card.domain, score }))))),
  };
};
