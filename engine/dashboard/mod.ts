/**
 * The dashboard: server-rendered pages over the store (jobs, one job, compare, the trial viewer, datasets), a hono
 * sub-app that `evolve serve` mounts behind its authentication.
 *
 * The room's public surface (issue 21 §5): what commands use, by name; the rest of the folder is private by convention.
 */
export { dashboardApp, type DashboardDeps } from "./app.ts";
export { loginPage } from "./views.ts";
