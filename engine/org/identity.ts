/**
 * Who "you" are on this machine (issue 23 §1, teams on one machine). A user is a local identity: `$EVOLVE_USER` when
 * set (one OS account acting for several people, or a test), else the login name the gateway bills (engine/config:
 * `USER`, else the OS account). Several people share a team by sharing one $EVOLVE_HOME (its store), each under
 * their own identity; an API token acts as the identity that made it.
 */
import { loginName } from "../config.ts";
import { EvolveError } from "../errors.ts";

/** What a user name may hold: it is stored in records and printed in tables, so plain and short. */
const USER_NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

/** The local identity of this process: `$EVOLVE_USER`, else the login name (`user_invalid` when unusable). */
export function localUser(env: NodeJS.ProcessEnv = process.env): string {
  const given = env.EVOLVE_USER?.trim();
  // the same login name the gateway bills to (engine/config), so a user is one name everywhere
  const name = given || loginName(env);
  if (!USER_NAME.test(name)) {
    throw new EvolveError(
      "user_invalid",
      `${given ? "EVOLVE_USER" : "the OS user name"} ${JSON.stringify(name)} is not a usable identity`,
      "set EVOLVE_USER to a plain name (letters, digits, . _ @ -, at most 64)",
    );
  }
  return name;
}
