/**
 * Who "you" are on this machine (issue 23 §1, teams on one machine). A user is a local identity: `$EVOLVE_USER` when
 * set (one OS account acting for several people, or a test), else the OS user name. Several people share a team by
 * sharing one $EVOLVE_HOME (its store), each under their own identity; an API token acts as the identity that made it.
 */
import { userInfo } from "node:os";
import { EvolveError } from "../errors.ts";

/** What a user name may hold: it is stored in records and printed in tables, so plain and short. */
const USER_NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

/** The local identity of this process: `$EVOLVE_USER`, else the OS user name (`user_invalid` when unusable). */
export function localUser(env: NodeJS.ProcessEnv = process.env): string {
  const given = env.EVOLVE_USER?.trim();
  let name = given;
  if (!name) {
    try {
      name = userInfo().username;
    } catch {
      name = env.USER ?? env.LOGNAME ?? "";
    }
  }
  if (!USER_NAME.test(name)) {
    throw new EvolveError(
      "user_invalid",
      `${given ? "EVOLVE_USER" : "the OS user name"} ${JSON.stringify(name)} is not a usable identity`,
      "set EVOLVE_USER to a plain name (letters, digits, . _ @ -, at most 64)",
    );
  }
  return name;
}
