/**
 * Where the host guard's jump must stand in FORWARD/INPUT (engine/driver/hostguard.ts standsFirst): above every rule
 * that could ACCEPT its bridge's traffic, but not necessarily rule 1: another evolve home's (or policy's) guard
 * jump matches only its own bridge, so it may stand above. Asserting rule 1 failed the full suite's trial-network
 * test whenever another evolve home ran on the host, and made two homes move their jumps over each other.
 */
import { describe, expect, it } from "vitest";
import { standsFirst } from "./hostguard.ts";

const ours = "-A FORWARD -i evgp1a2b3c -j EVOLVE-FWD-evgp1a2b3c";
const otherHome = "-A FORWARD -i evgd9f8e7d -j EVOLVE-FWD-evgd9f8e7d";

describe("standsFirst", () => {
  it("holds with other evolve guards' jumps above it, and only then", () => {
    expect(standsFirst([ours, "-A FORWARD -j CNI-FORWARD"], ours)).toBe(true);
    expect(standsFirst([otherHome, ours, "-A FORWARD -j CNI-FORWARD"], ours)).toBe(true);
    expect(standsFirst(["-A FORWARD -i evgpffff -j REJECT --reject-with icmp6-adm-prohibited", ours], ours)).toBe(true);
    expect(standsFirst(["-A INPUT -i evgp0000 -j EVOLVE-IN-evgp0000", "-A INPUT -i evgp1a2b3c -j EVOLVE-IN-evgp1a2b3c"], "-A INPUT -i evgp1a2b3c -j EVOLVE-IN-evgp1a2b3c")).toBe(true);
  });

  it("fails when anything else stands above it, or it is missing", () => {
    expect(standsFirst(["-A FORWARD -j CNI-FORWARD", ours], ours)).toBe(false);
    expect(standsFirst([otherHome, "-A FORWARD -i evgp1a2b3c -m comment --comment bypass -j ACCEPT", ours], ours)).toBe(false);
    // a rule dressed as a guard jump but going elsewhere, or another chain's jump, is no guard
    expect(standsFirst(["-A FORWARD -i evgd9f8e7d -j ACCEPT", ours], ours)).toBe(false);
    expect(standsFirst(["-A FORWARD -i evgd9f8e7d -j EVOLVE-FWD-evgother", ours], ours)).toBe(false);
    expect(standsFirst([otherHome], ours)).toBe(false);
  });
});
