// The theme reads the light/dark mode from <html data-mode>, which this build
// leaves empty; on a reader's first visit that logs a console error. Start at
// the reader's saved choice, or "auto" (follow the system).
if (!document.documentElement.dataset.mode) {
  document.documentElement.dataset.mode = localStorage.getItem("mode") || "auto";
}
