import { Router } from 'express';
import type { Dashboard } from '../dashboard/index.js';
import { routeMiddleware } from './express.js';

/**
 * The dashboard as an Express router: `app.use(dashboard.basePath, createDashboardRouter(dashboard))`.
 * Keep body parsers that read urlencoded or multipart bodies off this path: the dashboard reads
 * its own forms (with limits), and Try it streams the upload to the handler.
 */
export function createDashboardRouter(dashboard: Dashboard): Router {
  const router = Router();
  router.use(routeMiddleware(dashboard.handle));
  return router;
}
